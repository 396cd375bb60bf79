"""Trace-replay simulator: the FGD paper's arrival experiment and a timeline replay with departures.

Sits outside the pure domain: it reads files, fans runs out over processes and writes results.
"""
