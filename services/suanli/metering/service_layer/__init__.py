"""Metering's use cases over ports: what each input does to node and task state, and what it emits."""
