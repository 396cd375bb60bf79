"""The device catalogue and compute units (CU).

1 CU is 1 TFLOPS of peak dense FP16 tensor throughput. An absolute unit rather than "1 reference GPU"
keeps every figure stable when the reference device retires, is published by every vendor for every
data-centre accelerator, and is the figure training and inference kernels are bound by. Memory capacity and
bandwidth are carried alongside, not folded into the CU: a scheduler filters on memory, it does not trade it
against FLOPS.

Names coming from drivers vary ("NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA H100 80GB HBM3", trace codes
such as "V100M32"), so lookups compare tokens after dropping vendor words and MIG suffixes; the longest
alias that is a token prefix of the name wins, so "A100 80GB PCIe" beats "A100" and "A10" never matches
"A100".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

MILLI = 1000
CATALOGUE_FILE = "devices.yaml"

_VENDOR_WORDS = frozenset({"NVIDIA", "TESLA", "GEFORCE", "QUADRO"})
_SEPARATORS = re.compile(r"[\s\-_/,()]+")
# A MIG device reports "<parent name> MIG 1g.10gb"; its compute class is its parent's.
_MIG_SUFFIX = re.compile(r"\s+MIG\s.*$", re.IGNORECASE)


class CatalogueError(ValueError):
    """The catalogue file is malformed (missing figure, duplicate alias, ...)."""


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """What one device model is worth. ``known=False`` means the figures are the configured default."""

    model: str
    fp16_tflops: float
    fp32_tflops: float | None = None
    memory_gib: float | None = None
    bandwidth_gbps: float | None = None
    tdp_w: float | None = None
    source: str = ""
    assumption: str | None = None
    known: bool = True

    @property
    def cu(self) -> float:
        """CU of one whole device."""
        return self.fp16_tflops

    def cu_of(self, milli: int = MILLI) -> float:
        """CU of a ``milli``/1000 share of this device."""
        if not 0 <= milli <= MILLI:
            raise ValueError(f"milli must be in 0..{MILLI}, got {milli}")
        return self.fp16_tflops * milli / MILLI


def name_tokens(name: str) -> tuple[str, ...]:
    """Upper-case tokens of a device name with vendor words and any MIG suffix removed."""
    stripped = _MIG_SUFFIX.sub("", name.strip())
    tokens = [t for t in _SEPARATORS.split(stripped.upper()) if t]
    while tokens and tokens[0] in _VENDOR_WORDS:
        tokens.pop(0)
    return tuple(tokens)


class DeviceCatalogue:
    """Model lookup with tolerant name matching; unknown models get ``unknown_gpu_cu`` and ``known=False``."""

    def __init__(
        self,
        devices: Iterable[DeviceClass],
        *,
        aliases: Mapping[str, Iterable[str]] | None = None,
        unknown_gpu_cu: float = 65.0,
        cpu_core_cu: float = 0.1,
    ) -> None:
        if unknown_gpu_cu < 0 or cpu_core_cu < 0:
            raise CatalogueError("CU defaults must be >= 0")
        self.unknown_gpu_cu = unknown_gpu_cu
        self.cpu_core_cu = cpu_core_cu
        self._devices: dict[str, DeviceClass] = {}
        self._by_tokens: dict[tuple[str, ...], DeviceClass] = {}
        for device in devices:
            if device.model in self._devices:
                raise CatalogueError(f"model {device.model!r} listed twice")
            self._devices[device.model] = device
            for spelling in (device.model, *(aliases or {}).get(device.model, ())):
                self._add_spelling(spelling, device)

    def _add_spelling(self, spelling: str, device: DeviceClass) -> None:
        tokens = name_tokens(spelling)
        if not tokens:
            raise CatalogueError(f"{device.model}: empty alias")
        other = self._by_tokens.get(tokens)
        if other is not None and other.model != device.model:
            raise CatalogueError(f"alias {spelling!r} names both {other.model!r} and {device.model!r}")
        self._by_tokens[tokens] = device

    @property
    def models(self) -> tuple[str, ...]:
        """Model names of the catalogue's devices."""
        return tuple(self._devices)

    def __iter__(self) -> Iterator[DeviceClass]:
        return iter(self._devices.values())

    def __len__(self) -> int:
        return len(self._devices)

    def lookup(self, name: str) -> DeviceClass:
        """The class of ``name``; never raises: an unrecognised name yields ``known=False`` defaults."""
        tokens = name_tokens(name)
        for end in range(len(tokens), 0, -1):
            found = self._by_tokens.get(tokens[:end])
            if found is not None:
                return found
        return DeviceClass(
            model=name.strip() or "unknown",
            fp16_tflops=self.unknown_gpu_cu,
            source="not in the device catalogue: configured default",
            known=False,
        )

    def cu_of(self, model: str, milli: int = MILLI) -> float:
        """CU of ``milli`` thousandths of one device of ``model``."""
        return self.lookup(model).cu_of(milli)

    def cpu_cu(self, cpu_milli: int) -> float:
        """CU of ``cpu_milli`` millicores."""
        if cpu_milli < 0:
            raise ValueError(f"cpu_milli must be >= 0, got {cpu_milli}")
        return self.cpu_core_cu * cpu_milli / MILLI

    def with_defaults(
        self, *, unknown_gpu_cu: float | None = None, cpu_core_cu: float | None = None
    ) -> DeviceCatalogue:
        """A copy with other defaults (e.g. from a CLI flag), same devices."""
        clone = DeviceCatalogue(
            (),
            unknown_gpu_cu=self.unknown_gpu_cu if unknown_gpu_cu is None else unknown_gpu_cu,
            cpu_core_cu=self.cpu_core_cu if cpu_core_cu is None else cpu_core_cu,
        )
        clone._devices = dict(self._devices)
        clone._by_tokens = dict(self._by_tokens)
        return clone


def parse_catalogue(document: Mapping[str, Any]) -> DeviceCatalogue:
    """Build a catalogue from the parsed YAML document (see devices.yaml for the format)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("devices"), list):
        raise CatalogueError("catalogue must be a mapping with a 'devices' list")
    cu = document.get("cu") or {}
    devices: list[DeviceClass] = []
    aliases: dict[str, list[str]] = {}
    for position, entry in enumerate(document["devices"]):
        device, names = _parse_device(position, entry)
        devices.append(device)
        aliases[device.model] = names
    try:
        return DeviceCatalogue(
            devices,
            aliases=aliases,
            unknown_gpu_cu=float(cu.get("unknown_gpu", 65.0)),
            cpu_core_cu=float(cu.get("cpu_core", 0.1)),
        )
    except (TypeError, ValueError) as exc:
        raise CatalogueError(str(exc)) from exc


def _parse_device(position: int, entry: Any) -> tuple[DeviceClass, list[str]]:
    if not isinstance(entry, Mapping) or not entry.get("model"):
        raise CatalogueError(f"devices[{position}]: needs a 'model'")
    model = str(entry["model"])
    if not entry.get("source"):
        raise CatalogueError(f"{model}: every figure needs a 'source'")
    try:
        device = DeviceClass(
            model=model,
            fp16_tflops=float(entry["fp16_tflops"]),
            fp32_tflops=_optional_float(entry.get("fp32_tflops")),
            memory_gib=_optional_float(entry.get("memory_gib")),
            bandwidth_gbps=_optional_float(entry.get("bandwidth_gbps")),
            tdp_w=_optional_float(entry.get("tdp_w")),
            source=str(entry["source"]),
            assumption=str(entry["assumption"]) if entry.get("assumption") else None,
        )
    except KeyError as exc:
        raise CatalogueError(f"{model}: missing {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise CatalogueError(f"{model}: {exc}") from None
    if device.fp16_tflops <= 0:
        raise CatalogueError(f"{model}: fp16_tflops must be > 0")
    return device, [str(a) for a in entry.get("aliases") or ()]


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@cache
def default_catalogue() -> DeviceCatalogue:
    """The catalogue shipped in this package (devices.yaml), parsed once."""
    text = resources.files(__package__).joinpath(CATALOGUE_FILE).read_text(encoding="utf-8")
    return parse_catalogue(yaml.safe_load(text))


def cu_of(model: str, milli: int = MILLI, *, catalogue: DeviceCatalogue | None = None) -> float:
    """CU of a ``milli``/1000 share of one ``model`` device."""
    return (catalogue or default_catalogue()).cu_of(model, milli)


def device_class(model: str, *, catalogue: DeviceCatalogue | None = None) -> DeviceClass:
    """The device class of ``model`` in ``catalogue`` (the default catalogue when None)."""
    return (catalogue or default_catalogue()).lookup(model)


def cpu_cu(cpu_milli: int, *, catalogue: DeviceCatalogue | None = None) -> float:
    """CU of ``cpu_milli`` millicores in ``catalogue`` (the default catalogue when None)."""
    return (catalogue or default_catalogue()).cpu_cu(cpu_milli)
