"""One inference replica as a model, and a live server driving that model in real time.

The model: its language model's shape, its speed on a device, its queue and batch.

In the kernel because two services use it: serving's simulator and capacity planning (sizing, the
autoscaler's service-time estimates, `suanli inference simulate`) and sensing's simulated agents, whose
replica tasks serve requests with the model's timing (docs/inference.md, "Simulated replicas").
"""
