"""Process entry points: run one real agent or a simulated fleet until stopped."""
