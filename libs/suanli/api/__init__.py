"""gRPC contracts as Python: stubs generated from schemas/proto by the build, never committed.

Importing this package generates (or regenerates, when a .proto is newer) the stubs with grpcio-tools,
so an editable install of a fresh clone works without a separate build step. The proto package
`suanli.<service>.v1` becomes the Python package `suanli.api.<service>.v1`, which keeps the generated
modules apart from the hand-written service packages of the same name.
"""

from __future__ import annotations

from suanli.api.build import ensure_generated

ensure_generated()
