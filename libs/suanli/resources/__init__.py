"""Compute units (CU) and the device catalogue behind them; see catalogue.py and docs/sensing.md."""

from suanli.resources.catalogue import (
    MILLI,
    CatalogueError,
    DeviceCatalogue,
    DeviceClass,
    cpu_cu,
    cu_of,
    default_catalogue,
    device_class,
    name_tokens,
    parse_catalogue,
)

__all__ = [
    "MILLI",
    "CatalogueError",
    "DeviceCatalogue",
    "DeviceClass",
    "cpu_cu",
    "cu_of",
    "default_catalogue",
    "device_class",
    "name_tokens",
    "parse_catalogue",
]
