"""Commands that are neither a source nor a consumer: `clean` (the engine offline over files)
and `dev` (the whole pipeline on this machine)."""
