"""Thin edges: NVML, psutil, fleet files, subprocesses, TCP probes, the event bus."""
