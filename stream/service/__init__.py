"""session-stream as a service on one machine: the state folder (layout), which processes run
for an OpenClaw install (plan), their supervision (supervisor), what `status` reads (status) and
the systemd and launchd units that start it all at boot (units)."""
