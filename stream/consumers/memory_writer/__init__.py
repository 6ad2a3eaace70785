"""The reference memory writer: one markdown memory file per session, from the clean topic.

One module per job:

- `render`: one transcript entry to one markdown line (what is written, and how);
- `files`: the session files and their index, durable and idempotent on (session, entry);
- `sink`: the files as a sink of the consumer loop (`stream.consumers.consume`), which
  commits only what is durable;
- `compare`: the demo's proof, duplicate lines written from the raw and the clean topic.

`session-stream memory-writer`'s arguments and exit codes are `stream.commands.memory_writer`.
"""
