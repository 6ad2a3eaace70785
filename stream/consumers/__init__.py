"""Consumers of the worker's output topics. A sink (the contract: `base`) runs under one
at-least-once consumer loop (`consume`); the reference memory writer is the first. Besides them
`tail`, and the verdict service the OpenClaw context engine asks; their commands are in
`stream.commands`."""
