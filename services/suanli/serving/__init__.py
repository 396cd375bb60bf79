"""Serving (推理服务): inference services as a workload kind (docs/serving.md, docs/inference.md).

`domain/` is the pure core: the service spec, the replicas' speed, the autoscalers, and the service
aggregate (`domain/service.py`) whose decisions are events and orders to the scheduler;
`service_layer/` runs each use case (an RPC, or a fact of the scheduler's topics) in one unit of work;
`adapters/` implements its ports in memory and on PostgreSQL and holds the contract records;
`bootstrap.py` chooses the adapters; `entrypoints/` the consumer, the gRPC API, the settings and the
long-lived process (`suanli serve serving`).
"""
