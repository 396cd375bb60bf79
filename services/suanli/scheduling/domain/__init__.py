"""Pure scheduling core: no I/O, no clock, no global randomness."""
