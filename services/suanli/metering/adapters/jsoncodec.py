"""Metering's JSON for its core's dataclasses (changelog values, task facts): the kernel's codec."""

from suanli.infra.dataclass_json import StateDecodeError, TaggedCodec, dumps, loads

__all__ = ["StateDecodeError", "TaggedCodec", "dumps", "loads"]
