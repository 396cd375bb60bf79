"""The console's renderers: proto messages in, HTML fragments out; every service-given name escaped."""

from __future__ import annotations

import re

from google.protobuf.timestamp_pb2 import Timestamp

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.serving.v1 import serving_pb2 as spb
from suanli.cli.render import gpu_slots
from suanli.console import views
from suanli.console.server import Sessions, _safe_next, resolve, split_listen

EVIL = '<script>alert("x")</script>'


def node(node_id: str, region: str, model: str, free: list[int]) -> pb.Node:
    return pb.Node(
        id=node_id,
        region=region,
        zone="z1",
        status="Ready",
        cpu_milli=64000,
        free_cpu_milli=32000,
        memory_mib=1024,
        free_memory_mib=256,
        devices=[pb.Device(index=i, model=model, free_milli=f) for i, f in enumerate(free)],
        labels={"rack": EVIL},
    )


def cells(table: str) -> list[str]:
    return re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", table)


def test_capacity_cells_sum_allocation_by_region_and_model() -> None:
    nodes = [
        node("a", "cn-east", "A100", [0, 1000]),
        node("b", "cn-east", "A100", [500]),
        node("c", "cn-west", "H200", [1000, 1000]),
    ]
    assert views.capacity_cells(nodes) == {("cn-east", "A100"): (1500, 3000), ("cn-west", "H200"): (0, 2000)}


def test_heatmap_has_a_row_per_region_a_column_per_model_and_totals() -> None:
    table = views.heatmap([node("a", "cn-east", "A100", [0, 0]), node("c", "cn-west", "H200", [1000, 500])])
    assert re.findall(r'<th scope="col">(.*?)</th>', table) == ["A100", "H200"]
    assert re.findall(r'<th scope="row">(.*?)</th>', table) == ["cn-east", "cn-west", "total"]
    assert "2/2<br><small>100%</small>" in table  # cn-east A100, fully allocated
    assert "0.5/2<br><small>25%</small>" in table  # cn-west H200
    assert "2.5/4<br><small>62%</small>" in table  # the grand total
    assert views.heat_style(1.0) in table and "color:#fff" in views.heat_style(1.0)


def test_heat_style_is_clamped() -> None:
    assert views.heat_style(-1) == views.heat_style(0)
    assert views.heat_style(7) == views.heat_style(1)
    assert views.heat_style(0) != views.heat_style(0.5)


def test_every_name_from_a_service_is_escaped() -> None:
    evil_node = node(EVIL, EVIL, EVIL, [0])
    queue = pb.Queue(
        name=EVIL, cohort=EVIL, resources=[pb.ResourceAmount(flavour=EVIL, guaranteed=1, used=1)]
    )
    job = pb.Job(
        id=EVIL,
        spec=pb.JobSpec(name=EVIL, queue=EVIL),
        state=pb.JOB_STATE_PENDING,
        pending_reason=pb.PendingReason(code=EVIL, message=EVIL, details={EVIL: EVIL}),
        tasks=[pb.TaskStatus(task_id=EVIL, state=EVIL, node_id=EVIL, region=EVIL, reason=EVIL)],
        regions=[EVIL],
    )
    described = pb.JobDescription(
        job=job,
        events=[pb.HistoryEvent(type=EVIL, message=EVIL, task_id=EVIL, node_id=EVIL, by=EVIL, reason=EVIL)],
        attempts=[pb.TaskAttempt(task_id=EVIL, node_id=EVIL, region=EVIL, outcome=EVIL, reason=EVIL)],
    )
    service = spb.Service(
        tenant=EVIL,
        name=EVIL,
        model=EVIL,
        state=EVIL,
        replicas=[spb.Replica(replica_id=EVIL, state=EVIL, node_id=EVIL, region=EVIL)],
    )
    explained = pb.Explanation(
        job_id=EVIL,
        pending_reason=job.pending_reason,
        top_nodes=[pb.NodeScore(node_id=EVIL, plugin_scores={EVIL: 1.0})],
        rejected_by_filter={EVIL: 2},
        regions=[pb.RegionVerdict(region=EVIL, verdict=EVIL)],
    )
    link = rpb.Link(src_region=EVIL, dst_region=EVIL, reason=EVIL, status=rpb.LINK_STATUS_DOWN)
    usage = bpb.GetUsageResponse(
        tenant=EVIL,
        period=bpb.Period(label=EVIL),
        currency=EVIL,
        total=EVIL,
        rows=[bpb.UsageRow(device_class=EVIL, region=EVIL, cu_hours=EVIL, amount=EVIL)],
    )
    fragments = [
        views.heatmap([evil_node]),
        views.nodes_table([evil_node]),
        views.queues_table([queue], views.pending_reasons([job])),
        views.jobs_table([job]),
        views.job_summary(job),
        views.tasks_table(job),
        views.timeline(described),
        views.attempts(described),
        views.services_table([service]),
        views.explanation(explained),
        views.network_matrix(rpb.NetworkMatrix(regions=[EVIL], region_links=[link])),
        views.charges_table([views.TenantUsage(EVIL, usage), views.TenantUsage(EVIL + "2", None, EVIL)]),
        views.unavailable(EVIL, EVIL),
        views.login_document(EVIL, EVIL),
        views.document(views.Page(EVIL, {"x": ""}), "/", EVIL, {"x": EVIL}),
    ]
    for fragment in fragments:
        assert "<script>" not in fragment, fragment
        assert "&lt;script&gt;" in fragment, fragment


def test_queue_rows_show_quota_use_borrowing_and_pending_reasons() -> None:
    queue = pb.Queue(
        name="acme/vision",
        cohort="acme",
        pending_jobs=3,
        running_jobs=1,
        dominant_share=0.25,
        resources=[
            pb.ResourceAmount(
                flavour="gpu:A100", guaranteed=4000, used=6000, borrowed=2000, borrowing_limit=4000
            ),
            pb.ResourceAmount(flavour="cpu", guaranteed=64000, used=16000),
        ],
    )
    pending = [
        pb.Job(
            spec=pb.JobSpec(queue="acme/vision"),
            state=pb.JOB_STATE_PENDING,
            pending_reason=pb.PendingReason(code="QuotaExceeded"),
        ),
        pb.Job(
            spec=pb.JobSpec(queue="acme/vision"),
            state=pb.JOB_STATE_PENDING,
            pending_reason=pb.PendingReason(code="QuotaExceeded"),
        ),
        pb.Job(spec=pb.JobSpec(queue="acme/vision"), state=pb.JOB_STATE_RUNNING),
    ]
    reasons = views.pending_reasons(pending)
    assert reasons == {"acme/vision": {"QuotaExceeded": 2}}
    table = views.queues_table([queue], reasons)
    texts = cells(table)
    assert "gpu:A100" in texts and "cpu" in texts
    assert "6 <small>150%</small>" in texts  # used over guaranteed: borrowing
    assert "2" in texts and "4" in texts  # borrowed, borrowing limit (GPUs)
    assert "<li>QuotaExceeded <b>2</b></li>" in table
    assert 'rowspan="2"' in table


def test_jobs_table_links_each_job_and_counts_placed_tasks() -> None:
    job = pb.Job(
        id="j/1",
        spec=pb.JobSpec(name="train", queue="acme", tasks=[pb.TaskSpec(replicas=2)]),
        state=pb.JOB_STATE_RUNNING,
        tasks=[pb.TaskStatus(task_id="t0", node_id="n1"), pb.TaskStatus(task_id="t1")],
        regions=["cn-east"],
    )
    table = views.jobs_table([job])
    assert 'href="/jobs/j%2F1"' in table
    assert '<td class="num">1/2</td>' in table
    assert 'class="state state-running"' in table
    counts = views.job_counts([job, pb.Job(state=pb.JOB_STATE_PENDING)])
    assert re.findall(r'data-stat="(\w+)".*?class="value">(\d+)<', counts) == [
        ("pending", "1"),
        ("running", "1"),
        ("succeeded", "0"),
        ("failed", "0"),
        ("cancelled", "0"),
    ]


def test_network_matrix_places_each_link_at_source_row_and_destination_column() -> None:
    matrix = rpb.NetworkMatrix(
        regions=["a", "b"],
        region_links=[
            rpb.Link(src_region="a", dst_region="b", rtt_ms=12.5, loss_ratio=0.01, status=rpb.LINK_STATUS_OK),
            rpb.Link(src_region="b", dst_region="a", rtt_ms=80, status=rpb.LINK_STATUS_DOWN, reason="cut"),
        ],
    )
    table = views.network_matrix(matrix)
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    # Row a: nothing measured a -> a, then a -> b; row b: b -> a (down), then nothing b -> b.
    assert re.findall(r'<td class="link ([\w-]+)"', rows[1]) == ["none", "link-ok"]
    assert re.findall(r'<td class="link ([\w-]+)"', rows[2]) == ["link-down", "none"]
    assert "12.5 ms" in rows[1] and "(cut)" in rows[2]


def test_charges_show_each_tenant_total_and_rows() -> None:
    usage = bpb.GetUsageResponse(
        tenant="acme",
        period=bpb.Period(label="2026-12"),
        currency="CNY",
        total="12.50",
        rows=[bpb.UsageRow(device_class="h200", region="cn-east", cu_hours="1.5", amount="12.50", charges=3)],
    )
    table = views.charges_table(
        [views.TenantUsage("globex", None, "no usage billed yet"), views.TenantUsage("acme", usage)]
    )
    assert table.index("acme") < table.index("globex")
    assert "12.50 CNY" in table and "2026-12" in table and "no usage billed yet" in table


def at(seconds: int) -> Timestamp:
    return Timestamp(seconds=1_790_000_000 + seconds)


def test_timeline_is_the_whole_recorded_history_with_causes() -> None:
    described = pb.JobDescription(
        events=[
            pb.HistoryEvent(at=at(0), type="JobSubmitted", message="submitted to acme", by="alice@acme"),
            pb.HistoryEvent(at=at(5), type="TaskPlaced", task_id="t0", attempt=1, node_id="e1"),
            pb.HistoryEvent(
                at=at(9),
                type="TaskPreempted",
                task_id="t0",
                attempt=1,
                message="preempted",
                by="job-urgent",
                reason="priority",
            ),
            pb.HistoryEvent(at=at(12), type="TaskFailed", task_id="t0", attempt=2, exit_code=3),
        ]
    )
    items = re.findall(r'<li data-event="(\w+)">(.*?)</li>', views.timeline(described))
    assert [name for name, _ in items] == ["JobSubmitted", "TaskPlaced", "TaskPreempted", "TaskFailed"]
    assert "submitted to acme" in items[0][1] and "by alice@acme" in items[0][1]
    assert "t0 (attempt 1) on e1" in items[1][1]
    assert "(by job-urgent; priority)" in items[2][1]
    assert "(exit code 3)" in items[3][1]
    assert "No events recorded yet." in views.timeline(pb.JobDescription())


def test_attempts_show_placement_run_time_and_use() -> None:
    described = pb.JobDescription(
        attempts=[
            pb.TaskAttempt(
                task_id="t0",
                attempt=1,
                node_id="e1",
                region="cn-east",
                gpu_indices=[0, 1],
                gpu_milli=[1000, 1000],
                placed_at=at(0),
                started_at=at(2),
                ended_at=at(3663),
                outcome="PREEMPTED",
                reason="priority",
                running_s=3661,
            )
        ],
        accounting=pb.JobAccounting(attempts=2, gpu_hours=2.034),
    )
    html = views.attempts(described)
    texts = cells(html.split("<tbody>")[1])
    assert texts[:5] == [
        "t0",
        "1",
        "e1",
        "cn-east",
        gpu_slots(pb.TaskStatus(gpu_indices=[0, 1], gpu_milli=[1000, 1000])),
    ]
    assert "01:01:01" in texts and "PREEMPTED" in texts and texts[-2:] == ["-", "priority"]
    assert "<dt>GPU-hours</dt><dd>2.034</dd>" in html
    assert "No attempts yet" in views.attempts(pb.JobDescription())


def test_services_show_replica_counts_and_each_replicas_load() -> None:
    chat = spb.Service(
        tenant="acme",
        name="chat",
        model="llama-2-7b",
        state="active",
        desired_replicas=3,
        placed_replicas=2,
        min_replicas=1,
        max_replicas=4,
        replicas=[
            spb.Replica(
                replica_id="r1",
                state="running",
                node_id="e1",
                region="cn-east",
                load=spb.ReplicaLoad(in_flight=5, queued=2, recent_latency_s=0.25, kv_free_tokens=9000),
            ),
            spb.Replica(replica_id="r2", state="placed", node_id="w1", region="cn-west"),
            spb.Replica(replica_id="r3", state="pending", pinned_region="cn-west"),
        ],
    )
    table = views.services_table([chat, spb.Service(tenant="acme", name="idle", state="active")])
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table)[1:]
    assert cells(rows[0])[:7] == ["acme/chat", "llama-2-7b", "active", "3", "2", "1", "1–4"]
    assert cells(rows[0])[7:] == ["r1", "running", "e1", "cn-east", "5", "2", "0.250", "9000"]
    assert cells(rows[1]) == ["r2", "placed", "w1", "cn-west", "no fresh report"]
    assert cells(rows[2])[:4] == ["r3", "pending", "-", "cn-west"]
    assert cells(rows[3])[:7] == ["acme/idle", "", "active", "0", "0", "0", "0–0"]
    assert 'rowspan="3"' in table
    assert "No inference services." in views.services_table([])


def test_document_links_the_stream_and_marks_the_current_page() -> None:
    doc = views.document(
        views.Page("Nodes", {"nodes": "<table></table>"}), "/nodes", "/events?page=/nodes", {}
    )
    assert 'data-stream="/events?page=/nodes"' in doc
    assert '<a href="/nodes" aria-current=page>' in doc
    assert '<section id="nodes"><table></table></section>' in doc
    assert '<script src="/static/console.js" defer></script>' in doc


def test_pages_resolve_by_path() -> None:
    assert resolve("/")[1] == {}  # type: ignore[index]
    assert resolve("/jobs/j%2F1")[1] == {"job_id": "j/1"}  # type: ignore[index]
    assert resolve("/services") is not None
    assert resolve("/nope") is None
    assert resolve("/jobs/a/b") is None


def test_only_local_paths_are_followed_after_login() -> None:
    assert _safe_next("/jobs?x=1") == "/jobs?x=1"
    for bad in ("https://evil.example/", "//evil.example/", "/\\evil.example", "jobs"):
        assert _safe_next(bad) == "/"


def test_sessions_expire_and_close() -> None:
    now = [0.0]
    sessions = Sessions("key", ttl_s=10, clock=lambda: now[0])
    assert sessions.matches("key") and not sessions.matches("kex") and not sessions.matches("")
    session = sessions.open()
    assert sessions.valid(session) and not sessions.valid("other")
    now[0] = 11
    assert not sessions.valid(session)
    again = sessions.open()
    sessions.close(again)
    assert not sessions.valid(again)


def test_listen_addresses() -> None:
    assert split_listen("127.0.0.1:8088") == ("127.0.0.1", 8088)
    assert split_listen("[::1]:0") == ("::1", 0)
    for bad in ("8088", ":8088", "host:", "host:99999", "host:x"):
        try:
            split_listen(bad)
        except ValueError as exc:
            assert "HOST:PORT" in str(exc)
        else:
            raise AssertionError(bad)
