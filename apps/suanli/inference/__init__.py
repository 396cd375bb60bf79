"""The inference simulator: the Azure LLM trace through balancing policy x autoscaler x regions."""
