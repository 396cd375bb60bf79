"""The pure core of billing: no I/O, no clock, no randomness (ids derive from the facts rated)."""
