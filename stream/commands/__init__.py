"""The commands with a module of their own here: `clean` (the engine offline over files), `dev`
(the whole pipeline on this machine), `gateway` (the Gateway source) and `verdicts` (the verdict
service)."""
