"""What the sync and async interpreters share: how a run starts (`base`), the pure parts
of carrying out commands (`common`), and started requests (`started`)."""
