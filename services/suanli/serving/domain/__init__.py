"""Serving's pure core: the service spec, the replica service-time model and queue, the autoscalers."""
