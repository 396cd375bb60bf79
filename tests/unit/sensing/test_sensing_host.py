"""Host collector on this machine (psutil), and the host-only fallback when NVML is unavailable."""

from __future__ import annotations

from suanli.sensing.adapters.host import HostCollector, NodeCollector


def test_psutil_host_values_are_sane() -> None:
    host = HostCollector().host()
    assert host.cpu_cores >= 1
    assert 0.0 <= host.cpu_utilisation_pct <= 100.0
    assert host.memory_total_mib > 0
    assert 0 <= host.memory_used_mib <= host.memory_total_mib


def test_node_without_a_device_collector_says_why() -> None:
    observation = NodeCollector(HostCollector(), None, gpu_missing="NVML library not found").collect()
    assert observation.devices == () and observation.degraded_reason == "NVML library not found"
    assert HostCollector().collect().degraded_reason is None
