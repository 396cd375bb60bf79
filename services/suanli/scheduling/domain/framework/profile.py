"""A scheduling profile: which plugins run at each extension point, with weights and arguments.

Written as a dict (or YAML), for example::

    name: fgd
    filters: [cpu, memory, gpu-model, gpu-fit]
    scores:
      - {name: fgd, weight: 1}
    devices: fgd
    tie_break: ordered   # or random (default)
    region_choice: {capacity: 1, network: 1, price: 0.5, rtt_scale_ms: 300}   # the defaults

An entry is a plugin name or a mapping with `name`, optional `args` and (scores only) `weight`. Loading
validates every name and argument against the registry, so a typo stops the scheduler before it starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from suanli.scheduling.domain.framework.plugin import ProfileError
from suanli.scheduling.domain.framework.regions import RegionWeights
from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginRegistry

_LIST_KEYS = {
    "admission": ExtensionPoint.ADMISSION,
    "filters": ExtensionPoint.FILTER,
    "scores": ExtensionPoint.SCORE,
    "post_filters": ExtensionPoint.POST_FILTER,
}
_ALLOWED_KEYS = {"name", "description", "devices", "tie_break", "region_choice", *_LIST_KEYS}
TIE_BREAKS = ("random", "ordered")


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    admission: tuple[PluginRef, ...]
    filters: tuple[PluginRef, ...]
    scores: tuple[PluginRef, ...]
    devices: PluginRef
    post_filters: tuple[PluginRef, ...] = ()
    description: str = ""
    tie_break: str = "random"
    region_choice: RegionWeights = field(default_factory=RegionWeights)

    @classmethod
    def from_yaml(cls, text: str, registry: PluginRegistry) -> Profile:
        data = yaml.safe_load(text)
        if not isinstance(data, Mapping):
            raise ProfileError("a profile must be a mapping")
        return cls.from_dict(data, registry)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], registry: PluginRegistry) -> Profile:
        unknown = sorted(set(data) - _ALLOWED_KEYS)
        if unknown:
            raise ProfileError(f"unknown profile key(s) {unknown}; allowed: {sorted(_ALLOWED_KEYS)}")
        name = data.get("name", "custom")
        if not isinstance(name, str) or not name:
            raise ProfileError("profile name must be a non-empty string")
        lists: dict[str, tuple[PluginRef, ...]] = {}
        for key, point in _LIST_KEYS.items():
            entries = data.get(key, [])
            if not isinstance(entries, list):
                raise ProfileError(f"profile {name!r}: {key!r} must be a list")
            lists[key] = tuple(_ref(entry, point, registry, weighted=key == "scores") for entry in entries)
        if not lists["filters"]:
            raise ProfileError(f"profile {name!r}: at least one filter is required")
        tie_break = data.get("tie_break", "random")
        if tie_break not in TIE_BREAKS:
            raise ProfileError(f"profile {name!r}: tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
        devices = _ref(data.get("devices", "lowest-index"), ExtensionPoint.DEVICES, registry, weighted=False)
        return cls(
            name=name,
            admission=lists["admission"],
            filters=lists["filters"],
            scores=lists["scores"],
            devices=devices,
            post_filters=lists["post_filters"],
            description=str(data.get("description", "")),
            tie_break=tie_break,
            region_choice=RegionWeights.from_dict(data.get("region_choice"), name),
        )


def _ref(entry: Any, point: ExtensionPoint, registry: PluginRegistry, weighted: bool) -> PluginRef:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise ProfileError(f"{point} entry {entry!r} must be a name or a mapping with a 'name'")
    allowed = {"name", "args", "weight"} if weighted else {"name", "args"}
    extra = sorted(set(entry) - allowed)
    if extra:
        raise ProfileError(f"{point} plugin {entry['name']!r}: unknown key(s) {extra}")
    args = entry.get("args", {}) or {}
    if not isinstance(args, Mapping):
        raise ProfileError(f"{point} plugin {entry['name']!r}: args must be a mapping")
    registry.get(point, entry["name"]).validate(args)
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        raise ProfileError(
            f"score plugin {entry['name']!r}: weight must be a positive number, got {weight!r}"
        )
    return PluginRef(name=entry["name"], args=dict(args), weight=float(weight))
