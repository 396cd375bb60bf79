"""Plugins registered by name, with the arguments each accepts.

A factory receives validated arguments and the plugin context. Argument specs are small: a name maps to the
accepted Python type(s) and a default, so a profile with an unknown argument or a wrong type is refused at
load time with a message naming the plugin and the argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from suanli.scheduling.domain.framework.plugin import PluginContext, ProfileError


class ExtensionPoint(StrEnum):
    ADMISSION = "admission"
    FILTER = "filter"
    SCORE = "score"
    DEVICES = "devices"
    POST_FILTER = "post_filter"


@dataclass(frozen=True, slots=True)
class Arg:
    types: tuple[type, ...]
    default: Any
    check: Callable[[Any], bool] | None = None
    help: str = ""


Factory = Callable[[Mapping[str, Any], PluginContext], Any]


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    point: ExtensionPoint
    factory: Factory
    args: Mapping[str, Arg] = field(default_factory=dict)
    help: str = ""

    def validate(self, given: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(given) - set(self.args))
        if unknown:
            raise ProfileError(
                f"plugin {self.name!r}: unknown argument(s) {unknown}; "
                f"accepted: {sorted(self.args) or 'none'}"
            )
        out: dict[str, Any] = {}
        for key, spec in self.args.items():
            value = given.get(key, spec.default)
            # bool is an int in Python; refuse True where a number is meant.
            bad_type = not isinstance(value, spec.types) or (
                isinstance(value, bool) and bool not in spec.types
            )
            if bad_type:
                names = "/".join(t.__name__ for t in spec.types)
                raise ProfileError(f"plugin {self.name!r}: argument {key!r} must be {names}, got {value!r}")
            if spec.check is not None and not spec.check(value):
                raise ProfileError(f"plugin {self.name!r}: argument {key!r}={value!r} is out of range")
            out[key] = value
        return out


class PluginRegistry:
    def __init__(self) -> None:
        self._specs: dict[tuple[ExtensionPoint, str], PluginSpec] = {}

    def register(self, spec: PluginSpec) -> None:
        key = (spec.point, spec.name)
        if key in self._specs:
            raise ValueError(f"{spec.point} plugin {spec.name!r} registered twice")
        self._specs[key] = spec

    def get(self, point: ExtensionPoint, name: str) -> PluginSpec:
        try:
            return self._specs[(point, name)]
        except KeyError:
            known = sorted(n for p, n in self._specs if p == point)
            raise ProfileError(f"unknown {point} plugin {name!r}; known: {known}") from None

    def names(self, point: ExtensionPoint) -> list[str]:
        return sorted(n for p, n in self._specs if p == point)

    def build(self, point: ExtensionPoint, name: str, args: Mapping[str, Any], ctx: PluginContext) -> Any:
        spec = self.get(point, name)
        return spec.factory(spec.validate(args), ctx)
