"""Sensing: the node agent — device discovery, heartbeats, network probes, and running placed tasks."""
