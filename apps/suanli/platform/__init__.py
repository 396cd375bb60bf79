"""The whole platform on one machine: supervised service processes, the demo workload and dashboard."""
