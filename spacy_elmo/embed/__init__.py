"""The `embed` job: sentences from files or stdin through a biLM into HDF5 (or a shard
directory), with its device choice; the CLI's `embed` parses its flags and calls this."""
