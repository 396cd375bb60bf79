"""Many agents in one process: route orders from ``placements`` by node, report, probe links.

A real agent is an `AgentHost` of one; a simulated fleet of hundreds shares one host, one producer and one
consumer. Orders for nodes this process does not host are skipped (every agent reads the whole topic,
since the topic's partitions are shared by many nodes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from suanli.clock import Clock, IdFactory
from suanli.sensing.domain import records
from suanli.sensing.domain.observation import NodeObservation
from suanli.sensing.domain.placement import InvalidOrder, parse_placement, parse_stop, parse_stop_request
from suanli.sensing.service_layer.agent import NodeAgent
from suanli.sensing.service_layer.ports import EventSink, LinkProber

Taken = tuple[NodeAgent, NodeObservation, dict[str, Any]]  # a node's snapshot, stamped, not yet sent

log = logging.getLogger(__name__)

PLACE = "TaskPlaced"
STOP = "TaskPreempted"
STOP_REQUEST = "TaskStopRequested"  # cancel, a gang sibling ended, or reconciliation (attempt 0 = any)


class AgentHost:
    def __init__(
        self,
        agents: Iterable[NodeAgent],
        sink: EventSink,
        *,
        clock: Clock,
        ids: IdFactory,
        prober: LinkProber | None = None,
        producer: str = "sensing/probes",
    ) -> None:
        self.agents: dict[str, NodeAgent] = {}
        for agent in agents:
            if agent.identity.node_id in self.agents:
                raise ValueError(f"two agents for node {agent.identity.node_id}")
            self.agents[agent.identity.node_id] = agent
        self._sink = sink
        self._clock = clock
        self._ids = ids
        self._prober = prober
        self._producer = producer
        self.probe_rounds = 0

    async def register_all(self) -> None:
        await asyncio.gather(*(agent.register() for agent in self.agents.values()))

    async def report_all(self) -> None:
        await self.report(self.agents)

    async def report(self, node_ids: Iterable[str]) -> None:
        """Report the given nodes now (each snapshot stamped when it is taken)."""
        await self.publish_reports(self.take_snapshots(node_ids))

    def take_snapshots(
        self, node_ids: Iterable[str]
    ) -> list[tuple[NodeAgent, NodeObservation, dict[str, Any]]]:
        """The given nodes' snapshots, stamped now; `publish_reports` sends them."""
        return [(agent, *agent.take_snapshot()) for agent in (self.agents[n] for n in node_ids)]

    async def publish_reports(self, taken: list[Taken]) -> None:
        # Concurrently, so the publisher batches their snapshots instead of one ack at a time.
        await asyncio.gather(*(agent.publish_report(obs, snapshot) for agent, obs, snapshot in taken))

    async def probe_links(self) -> int:
        """One probe round; returns how many LinkMeasured were published."""
        if self._prober is None:
            return 0
        self.probe_rounds += 1
        samples = await self._prober.probe_round(self.probe_rounds)
        await asyncio.gather(
            *(
                self._sink.publish(
                    "LinkMeasured",
                    records.link_measured(
                        self._producer, s, records.Stamp(str(self._ids()), self._clock.now())
                    ),
                )
                for s in samples
            )
        )
        return len(samples)

    async def handle_order(self, event_name: str, record: Mapping[str, Any], key: str | None = None) -> bool:
        """Act on one record from ``placements``; False when it is not for a node hosted here.

        Raises `InvalidOrder` for a record the agent cannot act on, so the consumer dead-letters it:
        one that fails validation, or one whose Kafka ``key`` (the node it was routed to) names another
        node than its ``node_id`` (a forged or corrupt order aimed at one node with another's name).
        Orders for other nodes are skipped, not refused: every agent reads the whole topic.
        """
        if event_name not in (PLACE, STOP, STOP_REQUEST):
            raise InvalidOrder(f"{event_name!r} does not belong on placements")
        node_id = record.get("node_id")
        if key is not None and key != node_id and (key in self.agents or node_id in self.agents):
            raise InvalidOrder(f"{event_name} keyed for node {key[:80]!r} names node_id {node_id!r}")
        agent = self.agents.get(node_id) if isinstance(node_id, str) else None
        if agent is None:
            if not isinstance(node_id, str) or not node_id:
                raise InvalidOrder(f"{event_name} without a node_id")
            return False
        if event_name == PLACE:
            await agent.place(parse_placement(record))
        elif event_name == STOP:
            await agent.stop(parse_stop(record))
        else:
            await agent.stop(parse_stop_request(record))
        return True

    def tasks_running(self) -> int:
        """Tasks running on every hosted node."""
        return sum(1 for agent in self.agents.values() for _ in agent.table.running())

    def orders_refused(self) -> int:
        """Placements refused at admission, over every hosted node, since the agent started."""
        return sum(agent.refused for agent in self.agents.values())

    def fence(self, reason: str) -> int:
        """Stop every task on every hosted node (self-fencing); how many were told to stop."""
        return sum(agent.stop_all(reason) for agent in self.agents.values())

    async def shutdown(self, *, stop_tasks: bool = True) -> None:
        await asyncio.gather(*(a.shutdown(stop_tasks=stop_tasks) for a in self.agents.values()))
