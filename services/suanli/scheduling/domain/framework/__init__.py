"""Placement framework: extension points, plugin registry, profiles, staged statements, the scheduler."""

from suanli.scheduling.domain.framework.plugin import Diagnosis, PluginContext, ProfileError
from suanli.scheduling.domain.framework.profile import PluginRef, Profile
from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginRegistry, PluginSpec
from suanli.scheduling.domain.framework.scheduler import GangResult, PlacementResult, Scheduler
from suanli.scheduling.domain.framework.statement import Statement

__all__ = [
    "Arg",
    "Diagnosis",
    "ExtensionPoint",
    "GangResult",
    "PlacementResult",
    "PluginContext",
    "PluginRef",
    "PluginRegistry",
    "PluginSpec",
    "Profile",
    "ProfileError",
    "Scheduler",
    "Statement",
]
