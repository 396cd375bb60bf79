"""Scheduling: jobs, queues, quotas and the placement framework."""
