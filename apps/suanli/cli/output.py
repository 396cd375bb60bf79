"""Where command results go: stdout, as rich renderables for people or a JSON/YAML dump for scripts."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType

from suanli.cli.render import OutputFormat, dump

OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", case_sensitive=False, help="table for people, json or yaml for scripts."),
]

stdout = Console(highlight=False)


def emit(fmt: OutputFormat, data: Any, table: RenderableType) -> None:
    if fmt is OutputFormat.TABLE:
        stdout.print(table)
    else:
        # Plain echo: rich would wrap long lines and style the text, which breaks parsers.
        typer.echo(dump(data, fmt))
