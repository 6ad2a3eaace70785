"""Consumers of the worker's output topics: the reference memory writer, `tail`, and the
verdict service the OpenClaw context engine asks; their commands are in `stream.commands`."""
