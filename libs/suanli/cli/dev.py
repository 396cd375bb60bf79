"""`suanli dev up|status|down`: the embedded broker and database for a developer's machine."""

from __future__ import annotations

import typer

app = typer.Typer(help="Start, inspect and stop the local broker and PostgreSQL.", no_args_is_help=True)
