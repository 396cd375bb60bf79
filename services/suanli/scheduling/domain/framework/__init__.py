"""Placement framework: extension points, plugin registry, profiles, staged statements, the scheduler."""

from suanli.scheduling.domain.framework.plugin import Diagnosis, GangContext, PluginContext, ProfileError
from suanli.scheduling.domain.framework.profile import PluginRef, Profile
from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginRegistry, PluginSpec
from suanli.scheduling.domain.framework.scheduler import GangResult, PlacementResult, Ranking, Scheduler
from suanli.scheduling.domain.framework.statement import Statement

__all__ = [
    "Arg",
    "Diagnosis",
    "ExtensionPoint",
    "GangContext",
    "GangResult",
    "PlacementResult",
    "PluginContext",
    "PluginRef",
    "PluginRegistry",
    "PluginSpec",
    "Profile",
    "ProfileError",
    "Ranking",
    "Scheduler",
    "Statement",
]
