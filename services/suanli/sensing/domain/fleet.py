"""Fleet files: a simulated inventory of regions -> sites -> node groups, expanded into nodes.

Expansion is deterministic: nodes come out in file order and are named ``<site>-<group>-<n>`` (n from 1,
zero-padded to 3 digits), so the same file always yields the same ids. The network between the fleet's
sites is the measured tables' (suanli.resources.network) where they know the regions and zones, with the
file's ``network`` section for the rest and for the jitter, loss and bandwidth models; ``faults`` scripts
link faults (domain.faults). Format: docs/sensing.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from suanli.resources import DeviceCatalogue
from suanli.resources.network import MeasuredNetwork
from suanli.sensing.domain.faults import Fault, FaultError, parse_faults
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.links import LinkModel, LinkProfile, SiteRef
from suanli.sensing.domain.network import BandwidthModel, JitterModel, LossModel

GROUP_LABEL = "suanli.io/node-group"

M = TypeVar("M", JitterModel, LossModel, BandwidthModel)


class FleetError(ValueError):
    """A fleet file that cannot be expanded; the message names the offending path."""


@dataclass(frozen=True, slots=True)
class SimNodeSpec:
    identity: NodeIdentity
    gpu_model: str | None
    gpus: int
    gpu_memory_mib: int
    cpu_cores: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class FleetSpec:
    name: str
    seed: int
    nodes: tuple[SimNodeSpec, ...]
    links: LinkModel
    faults: tuple[Fault, ...] = ()

    @property
    def sites(self) -> tuple[SiteRef, ...]:
        seen = dict.fromkeys(SiteRef(n.identity.region, n.identity.site, n.identity.zone) for n in self.nodes)
        return tuple(seen)

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n.identity.region for n in self.nodes))


def parse_fleet(
    document: Any, catalogue: DeviceCatalogue, measured: MeasuredNetwork | None = None
) -> FleetSpec:
    """Validate and expand a parsed fleet document; ``measured`` seeds the network between its sites."""
    doc = _mapping(document, "fleet")
    seed = _int(doc.get("seed", 0), "seed")
    nodes: list[SimNodeSpec] = []
    for r, region in enumerate(_list(doc.get("regions"), "regions")):
        rpath = f"regions[{r}]"
        region = _mapping(region, rpath)
        region_name = _name(region, rpath)
        for s, site in enumerate(_list(region.get("sites"), f"{rpath}.sites")):
            spath = f"{rpath}.sites[{s}]"
            site = _mapping(site, spath)
            nodes.extend(_expand_site(region_name, site, spath, catalogue))
    ids = [n.identity.node_id for n in nodes]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise FleetError(f"node ids repeat: {duplicates[:5]}")
    if not nodes:
        raise FleetError("fleet has no nodes")
    links = _link_model(doc.get("network") or {}, measured)
    spec = FleetSpec(str(doc.get("name") or "fleet"), seed, tuple(nodes), links)
    try:
        faults = parse_faults(
            doc.get("faults"), regions=spec.regions, sites=[s.site for s in spec.sites], path="faults"
        )
    except FaultError as exc:
        raise FleetError(str(exc)) from None
    return FleetSpec(spec.name, spec.seed, spec.nodes, spec.links, faults)


def _expand_site(
    region: str, site: Mapping[str, Any], path: str, catalogue: DeviceCatalogue
) -> list[SimNodeSpec]:
    site_name = _name(site, path)
    zone = str(site.get("zone") or f"{region}-{site_name}")
    nodes: list[SimNodeSpec] = []
    for g, group in enumerate(_list(site.get("node_groups"), f"{path}.node_groups")):
        gpath = f"{path}.node_groups[{g}]"
        group = _mapping(group, gpath)
        group_name = _name(group, gpath)
        count = _int(group.get("count", 1), f"{gpath}.count")
        gpus = _int(group.get("gpus_per_node", 0), f"{gpath}.gpus_per_node")
        model = group.get("gpu_model")
        if gpus and not model:
            raise FleetError(f"{gpath}: gpus_per_node without gpu_model")
        model = str(model) if gpus else None
        gpu_memory_gib = group.get("gpu_memory_gib")
        if gpu_memory_gib is None and model is not None:
            gpu_memory_gib = catalogue.lookup(model).memory_gib or 16
        labels = _labels(group.get("labels"), f"{gpath}.labels")
        cpu_cores = _int(group.get("cpu_cores", 32), f"{gpath}.cpu_cores", minimum=1)
        memory_mib = int(_number(group.get("memory_gib", 256), f"{gpath}.memory_gib") * 1024)
        for n in range(1, count + 1):
            identity = NodeIdentity(
                node_id=f"{site_name}-{group_name}-{n:03d}",
                region=region,
                zone=zone,
                site=site_name,
                labels={**labels, GROUP_LABEL: group_name},
            )
            nodes.append(
                SimNodeSpec(
                    identity=identity,
                    gpu_model=model,
                    gpus=gpus,
                    gpu_memory_mib=int(_number(gpu_memory_gib or 0, f"{gpath}.gpu_memory_gib") * 1024),
                    cpu_cores=cpu_cores,
                    memory_mib=memory_mib,
                )
            )
    return nodes


def _link_model(network: Any, measured: MeasuredNetwork | None) -> LinkModel:
    net = _mapping(network, "network")
    defaults = LinkModel()
    use_measured = net.get("measured", True)
    if not isinstance(use_measured, bool):
        raise FleetError(f"network.measured: expected true or false, got {use_measured!r}")
    pairs: dict[frozenset[str], LinkProfile] = {}
    for i, entry in enumerate(_list(net.get("region_pairs") or [], "network.region_pairs")):
        path = f"network.region_pairs[{i}]"
        entry = _mapping(entry, path)
        regions = entry.get("regions")
        if not isinstance(regions, Sequence) or isinstance(regions, str) or len(set(regions)) != 2:
            raise FleetError(f"{path}.regions: needs two different region names")
        pairs[frozenset(str(r) for r in regions)] = _profile(entry, path)
    return LinkModel(
        intra_site=_profile(net.get("intra_site"), "network.intra_site", defaults.intra_site),
        intra_region=_profile(net.get("intra_region"), "network.intra_region", defaults.intra_region),
        inter_region=_profile(net.get("inter_region"), "network.inter_region", defaults.inter_region),
        region_pairs=pairs,
        probes_per_round=_int(net.get("probes_per_round", 10), "network.probes_per_round", minimum=1),
        measured=measured if use_measured else None,
        same_zone_rtt_ms=_number(
            net.get("same_zone_rtt_ms", defaults.same_zone_rtt_ms), "network.same_zone_rtt_ms"
        ),
        jitter=_model(JitterModel, net.get("jitter"), "network.jitter", defaults.jitter),
        loss=_model(LossModel, net.get("loss"), "network.loss", defaults.loss),
        bandwidth=_model(BandwidthModel, net.get("bandwidth"), "network.bandwidth", defaults.bandwidth),
    )


def _model(kind: type[M], raw: Any, path: str, default: M) -> M:
    """A model's parameters from the file, each field defaulting to ``default``'s."""
    if raw is None:
        return default
    entry = _mapping(raw, path)
    fields = kind.__dataclass_fields__
    unknown = sorted(str(k) for k in entry if k not in fields)
    if unknown:
        raise FleetError(f"{path}: unknown field {unknown[0]!r} (known: {', '.join(fields)})")
    values = {name: _number(entry.get(name, getattr(default, name)), f"{path}.{name}") for name in fields}
    try:
        return kind(**values)
    except ValueError as exc:
        raise FleetError(f"{path}: {exc}") from None


def _profile(raw: Any, path: str, default: LinkProfile | None = None) -> LinkProfile:
    if raw is None and default is not None:
        return default
    entry = _mapping(raw, path)
    bandwidth = entry.get("bandwidth_mbps")
    try:
        return LinkProfile(
            rtt_ms=_number(entry.get("rtt_ms"), f"{path}.rtt_ms"),
            jitter_ms=_number(entry.get("jitter_ms", 0.0), f"{path}.jitter_ms"),
            loss_ratio=_number(entry.get("loss_ratio", 0.0), f"{path}.loss_ratio"),
            bandwidth_mbps=None if bandwidth is None else _number(bandwidth, f"{path}.bandwidth_mbps"),
        )
    except ValueError as exc:
        if isinstance(exc, FleetError):
            raise
        raise FleetError(f"{path}: {exc}") from None


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FleetError(f"{path}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise FleetError(f"{path}: expected a list, got {type(value).__name__}")
    return value


def _name(entry: Mapping[str, Any], path: str) -> str:
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise FleetError(f"{path}.name: required")
    return name.strip()


def _int(value: Any, path: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FleetError(f"{path}: expected an integer >= {minimum}, got {value!r}")
    return value


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise FleetError(f"{path}: expected a number >= 0, got {value!r}")
    return float(value)


def _labels(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    return {str(k): str(v) for k, v in _mapping(value, path).items()}
