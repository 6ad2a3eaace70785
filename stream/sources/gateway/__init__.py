"""`session-stream gateway`: the OpenClaw Gateway's event bus says when, the store says what.

protocol.py holds the frames of the Gateway WebSocket protocol v4, client.py the connection
(handshake, subscription, keepalive, reconnects), stores.py how the agent stores are found,
source.py the source itself and projection.py the display-projection mode for a remote
gateway; the command line is `stream.commands.gateway`.
"""
