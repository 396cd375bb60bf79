"""Routing (算力路由): the network-state view and compute-aware request steering (docs/routing.md)."""
