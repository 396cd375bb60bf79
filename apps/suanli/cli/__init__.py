"""The `suanli` command line."""
