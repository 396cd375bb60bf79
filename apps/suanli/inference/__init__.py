"""Inference apps: the simulator (the Azure LLM trace through balancing policy x autoscaler x regions) and
the request gateway (`suanli gateway`)."""
