"""faust's Kafka transport, with a fetch wait metering chooses instead of faust's fixed 1.5 s.

Tansu does not answer a parked fetch when a record arrives, only when the fetch's wait runs out
(measured: a record waited ~320 ms at a 1,500 ms wait, ~21 ms at 100 ms). faust hard-codes
``fetch_max_wait_ms=1500`` for its worker's consumer, so every input of metering waited that long before it
was handled. Apache Kafka answers a parked fetch as soon as data arrives; there a shorter wait only costs
more empty fetches while the topics are idle.
"""

from __future__ import annotations

from typing import cast

import aiokafka
from faust.transport.drivers import aiokafka as driver
from faust.types import AppT


class _ConsumerThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: driver.Transport) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # Not started yet: the consumer builds its fetcher from this value at start.
        consumer._fetch_max_wait_ms = cast(ShortFetchTransport, transport).fetch_max_wait_ms
        return consumer


class _Consumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class ShortFetchTransport(driver.Transport):
    Consumer = _Consumer

    def __init__(self, app: AppT, *, fetch_max_wait_ms: int) -> None:
        if fetch_max_wait_ms <= 0:
            raise ValueError("Tansu fails fetch_max_wait_ms=0; use a short positive wait")
        super().__init__(list(app.conf.broker_consumer), app)
        self.fetch_max_wait_ms = fetch_max_wait_ms
