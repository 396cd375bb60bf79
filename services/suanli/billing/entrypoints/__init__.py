"""Billing's process: the consumer, the outbox relay, the period closer and the gRPC API."""
