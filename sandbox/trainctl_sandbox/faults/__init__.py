"""The fault switches: the admin actions that set them (inside the server) and the `trainctl sandbox`
subcommands that call those actions (in the user's process, so no moto here)."""
