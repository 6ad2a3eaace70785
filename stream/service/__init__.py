"""session-stream as a service on one machine: the state folder (layout), which processes run
for an OpenClaw install (plan), their supervision (supervisor), `up`'s run and up.json
(pipeline), what `status` reads (status), and the systemd and launchd definitions that start it
at boot (units) with the managers that install them (managers)."""
