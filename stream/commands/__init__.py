"""Every subcommand of `session-stream`, one module each: its flags (the shared ones from
`stream.settings.OPTIONS`) and its exit codes, around the package that does the work.

`clean` (the engine offline over files), `worker`, the sources `produce`, `follow`,
`follow_sqlite` and `gateway` (with `publishing`, what the source commands share), the consumers
`tail`, `memory_writer` and `verdicts`, `dev` (the whole pipeline on this machine), and `up`,
`status`, `install`, `uninstall` and `broker` (one machine, run like a service).
"""
