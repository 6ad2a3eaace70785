"""Consumers of the worker's output topics: the reference memory writer and `tail`."""
