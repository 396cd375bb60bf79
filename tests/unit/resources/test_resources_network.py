"""The kernel's model of the measured network tables: one reader for sensing, the simulator and benches."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.data import DATA_DIR_ENV
from suanli.resources.network import NetworkDataError, measured_network, read_measured_network

REGIONS = "src_region,dst_region,rtt_ms_avg\nA,B,10\nA,B,30\nA,B,12\nB,A,11\n"
ZONES = "region,src_zone,dst_zone,rtt_ms_avg\nA,A 1,A 2,1.5\nA,A 2,A 1,1.5\nB,B 1,B 2,0.7\n"


def test_given_text_is_parsed_without_reading_files() -> None:
    net = read_measured_network(REGIONS, ZONES)
    assert net.regions == ("a", "b")
    assert net.region_rtt("a", "b") == 12.0  # the median of the windows, per direction
    assert net.region_rtt("b", "a") == 11.0
    assert net.zones_of("a") == ("a-1", "a-2") and net.zones_of("c") == ()
    assert net.zone_rtt("b-1", "b-2") == 0.7


def test_the_packaged_tables_are_read_once_per_process() -> None:
    assert measured_network() is measured_network()
    assert len(measured_network().regions) == 10
    assert measured_network().zones_of("dallas") == ("dallas-1", "dallas-2", "dallas-3")


def test_a_missing_table_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(NetworkDataError, match=r"traces/network/regions_rtt\.csv"):
        read_measured_network()
    with pytest.raises(NetworkDataError, match=r"traces/network/zones_rtt\.csv"):
        read_measured_network(regions_text=REGIONS)
