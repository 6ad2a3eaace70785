"""OpenClaw's per-agent SQLite store (2026.8+), as `follow-sqlite` and the gateway source read
it: `reader` (the SQL: keyset pages, headers, the change counter), `rewrites` (telling a
transcript rewritten in place and where to send it again from, with no SQLite; the checkpoint's
content) and `changes` (when to look at the change counter next)."""
