"""Built-in plugins, one module per policy, and the registry that knows them all."""

from __future__ import annotations

from functools import cache

from suanli.scheduling.domain.framework.registry import PluginRegistry


@cache
def default_registry() -> PluginRegistry:
    from suanli.scheduling.domain.plugins import (
        bestfit,
        clustering,
        devices,
        dotprod,
        fgd,
        fgdb,
        fgdx,
        filters,
        network,
        packing,
        random_pick,
        spread,
        topology,
    )

    registry = PluginRegistry()
    for module in (
        filters,
        devices,
        random_pick,
        dotprod,
        clustering,
        packing,
        bestfit,
        spread,
        fgd,
        fgdx,
        fgdb,
        network,
        topology,
    ):
        for spec in module.SPECS:
            registry.register(spec)
    return registry
