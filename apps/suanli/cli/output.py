"""Where command results go: stdout, as rich renderables for people or a JSON/YAML dump for scripts.

Commands whose answer is rows (billing) also speak CSV: they describe their answer once as `Rows` and
`emit_rows` writes it in the format asked for, so no command formats tables or CSV by itself.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from suanli.cli.render import OutputFormat, dump

OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", case_sensitive=False, help="table for people, json or yaml for scripts."),
]

stdout = Console(highlight=False)
UNBOUNDED = 1 << 16  # columns: wider than any table, so measuring one gives its natural width


def emit(fmt: OutputFormat, data: Any, table: RenderableType) -> None:
    if fmt is OutputFormat.TABLE:
        stdout.print(table)
    else:
        # Plain echo: rich would wrap long lines and style the text, which breaks parsers.
        typer.echo(dump(data, fmt))


class RowsFormat(StrEnum):
    """`OutputFormat` plus CSV, for answers that are rows."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"
    CSV = "csv"


RowsOutputOption = Annotated[
    RowsFormat,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        help="table for people; json or yaml (the whole answer), csv (the rows, a header) for scripts.",
    ),
]


@dataclass(frozen=True, slots=True)
class Rows:
    """An answer as rows of text: `columns` name the CSV header (the table shows them upper-cased)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    title: str = ""  # a line above the table (totals, the period); never in CSV
    right: frozenset[str] = frozenset()  # numeric columns, right-aligned in the table


def rows_table(rows: Rows) -> Table:
    """Plain columns, like the job and node tables."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in rows.columns:
        table.add_column(name.upper().replace("_", " "), justify="right" if name in rows.right else "left")
    for row in rows.rows:
        table.add_row(*row)
    return table


def rows_csv(rows: Rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(rows.columns)
    writer.writerows(rows.rows)
    return out.getvalue()


def emit_rows(fmt: RowsFormat, data: Any, rows: Rows) -> None:
    """`rows` as a table or CSV, or `data` (the whole answer) as JSON or YAML."""
    if fmt is RowsFormat.CSV:
        typer.echo(rows_csv(rows), nl=False)
    elif fmt is RowsFormat.TABLE:
        table = rows_table(rows)
        console = stdout
        if not stdout.is_terminal:
            # Piped, rich would squeeze the table into 80 columns and cut cells: give it the width it
            # needs (a console's own width caps what print may use, hence one of that width).
            natural = Measurement.get(stdout, stdout.options.update_width(UNBOUNDED), table).maximum
            console = Console(file=stdout.file, highlight=False, width=max(natural, stdout.width))
        if rows.title:
            console.print(Text(rows.title), soft_wrap=True)
        console.print(table)
    else:
        emit(OutputFormat(fmt.value), data, Text(""))
