"""Serving (推理服务): inference services, their replicas' speed and the autoscalers (docs/inference.md)."""
