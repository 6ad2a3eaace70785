"""What feeds the input topic: OpenClaw's session files (`produce`, `follow`), its agent
databases (`sqlite`) and its Gateway (`gateway`). Each source keeps to the contract of `base`
and is run by the loop of `publish`; their commands are in `stream.commands`."""
