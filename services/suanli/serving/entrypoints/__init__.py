"""Serving's process: the consumer of the scheduler's topics, the outbox relay and the gRPC API."""
