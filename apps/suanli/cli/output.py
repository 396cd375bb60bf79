"""Where command results go: one output style for every list and get command (docs/cli.md, "Output").

`-o table` (default) | `wide` | `name` | `json` | `yaml` | `csv` | `jsonpath=TEMPLATE`, `--no-headers`
and `--sort-by`. A list command describes its answer once as `Rows` (the cells, plus each row's data
and name) and `emit_rows` writes it in the format asked for; a get command hands `emit` its data and
the detail view a person reads. No command formats tables, CSV or JSON by itself.

Tables printed to something that is not a terminal (a pipe, a file) are as wide as their content:
rich would otherwise squeeze them into 80 columns and cut cells.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

stdout = Console(highlight=False)
UNBOUNDED = 1 << 16  # columns: wider than any table, so measuring one gives its natural width

Cell = str | Text  # a Text cell carries a style (job states); its plain text is what scripts see


class Format(StrEnum):
    TABLE = "table"
    WIDE = "wide"
    NAME = "name"
    JSON = "json"
    YAML = "yaml"
    CSV = "csv"
    JSONPATH = "jsonpath"


@dataclass(frozen=True, slots=True)
class Output:
    """What `-o` asked for: a format, and the template of `jsonpath=TEMPLATE`."""

    format: Format = Format.TABLE
    template: str = ""

    @classmethod
    def parse(cls, value: str | Output) -> Output:
        """`-o` text as an Output; typer also hands the default (already an Output) through here."""
        if isinstance(value, Output):
            return value
        name, sep, template = value.partition("=")
        try:
            fmt = Format(name.strip().lower())
        except ValueError:
            raise typer.BadParameter(f"{value!r}: one of {FORMATS_HELP}", param_hint="--output") from None
        if (fmt is Format.JSONPATH) != bool(sep):
            raise typer.BadParameter(f"{value!r}: only jsonpath takes =TEMPLATE", param_hint="--output")
        if fmt is Format.JSONPATH:
            JsonPath.compile(template)  # a bad template is a usage error before any call is made
        return cls(fmt, template)

    @property
    def human(self) -> bool:
        """Table or wide: the forms with notes for people (hints, titles) around the answer."""
        return self.format in (Format.TABLE, Format.WIDE)


TABLE = Output()
FORMATS_HELP = "table, wide, name, json, yaml, csv, jsonpath=TEMPLATE"

OutputOption = Annotated[
    Output,
    typer.Option(
        "--output",
        "-o",
        parser=Output.parse,
        metavar="FORMAT",
        autocompletion=lambda: [*(f.value for f in Format if f is not Format.JSONPATH), "jsonpath="],
        help=f"{FORMATS_HELP}: table/wide for people (wide adds columns), name (kind/name per line), "
        "json/yaml (the whole answer), csv (the rows), jsonpath={.jobs[*].id} (fields of the JSON).",
        show_default=False,
    ),
]
NoHeadersOption = Annotated[
    bool, typer.Option("--no-headers", help="Tables and CSV without their heading line (and no title).")
]
SortByOption = Annotated[
    str,
    typer.Option(
        "--sort-by",
        metavar="COLUMN",
        help="Sort rows by a column (its heading: submitted, name, ...) or a JSON field (.spec.name); "
        "-COLUMN sorts descending.",
        show_default=False,
    ),
]


@dataclass(frozen=True, slots=True)
class Rows:
    """A list answer: `columns` name the CSV header (the table shows them upper-cased), one cell each.

    `items` are the rows' own data (what JSON and YAML list, in the same order, under `data[key]`);
    `names` what `-o name` prints after `kind/` (default: the first column).
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    title: str = ""  # a line above the table (totals, the period); never in CSV
    right: frozenset[str] = frozenset()  # numeric columns, right-aligned in the table
    wide: frozenset[str] = frozenset()  # columns only `-o wide` (and CSV) show
    kind: str = ""
    names: Sequence[str] = ()
    items: Sequence[Any] = ()
    key: str = ""
    wrap: frozenset[str] = frozenset()  # columns a terminal-wide table may wrap (free text)
    # Rows of one item (a queue's flavours) repeat its first `group` cells; the table shows them once
    # per run of the item's rows, CSV on every row so each line stands alone.
    group: int = 0
    # The table's headings, one per column, where capitals would misspell them (a matrix's region names).
    headings: Sequence[str] = ()


def plain_text(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _heading(column: str) -> str:
    return column.upper().replace("_", " ")


def rows_table(rows: Rows, *, wide: bool = False, headers: bool = True) -> Table:
    """Plain columns without borders: the look of every list."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_header=headers)
    shown = [i for i, name in enumerate(rows.columns) if wide or name not in rows.wide]
    for i in shown:
        name = rows.columns[i]
        heading = rows.headings[i] if rows.headings else _heading(name)
        table.add_column(
            heading, justify="right" if name in rows.right else "left", no_wrap=name not in rows.wrap
        )
    for n, row in enumerate(rows.rows):
        repeated = rows.group and n and rows.names and rows.names[n] == rows.names[n - 1]
        cells = [("" if repeated and i < rows.group else row[i]) for i in shown]
        table.add_row(*cells)
    return table


def unique_items(values: Sequence[Any]) -> list[Any]:
    """Each item once, in order: an item of several rows is still one entry (by identity)."""
    seen: set[int] = set()
    unique = []
    for value in values:
        if id(value) not in seen:
            seen.add(id(value))
            unique.append(value)
    return unique


def rows_csv(rows: Rows, *, headers: bool = True) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if headers:
        writer.writerow(rows.columns)
    writer.writerows([plain_text(c) for c in row] for row in rows.rows)
    return out.getvalue()


# --- sorting -----------------------------------------------------------------------------------------

_NUMBER = re.compile(r"^-?\d+(\.\d+)?%?$")


def _sort_key(value: Any) -> tuple[int, float, str]:
    """Numbers by value, then text; missing values ("", "-", None) last whichever the direction."""
    text = value if isinstance(value, str) else "" if value is None else json.dumps(value)
    if text in ("", "-"):
        return (2, 0.0, "")
    if _NUMBER.match(text):
        return (0, float(text.rstrip("%")), "")
    return (1, 0.0, text)


def _normal(name: str) -> str:
    return re.sub(r"[\s_-]+", "", name.lower())


def sorted_rows(rows: Rows, sort_by: str) -> Rows:
    """`rows` (cells, names, items together) in the order `--sort-by` asks for."""
    spec = sort_by.strip()
    if not spec:
        return rows
    descending = spec.startswith("-")
    spec = spec.removeprefix("-")
    by_column = {_normal(c): i for i, c in enumerate(rows.columns)}
    keys: list[tuple[int, float, str]]
    if _normal(spec) in by_column:
        index = by_column[_normal(spec)]
        keys = [_sort_key(plain_text(row[index])) for row in rows.rows]
    elif spec.startswith(("{", ".", "$")) and rows.items:
        path = JsonPath.compile(spec if spec.startswith("{") else "{" + spec + "}")
        keys = [_sort_key(next(iter(path.values(item)), None)) for item in rows.items]
    else:
        columns = ", ".join(c.lower() for c in rows.columns)
        raise typer.BadParameter(f"{sort_by!r}: a column ({columns}) or a .field", param_hint="--sort-by")
    # Missing values stay last when descending too: sort present ones, then append the rest in order.
    order = sorted(range(len(keys)), key=keys.__getitem__, reverse=descending)
    order = [i for i in order if keys[i][0] != 2] + [i for i in range(len(keys)) if keys[i][0] == 2]

    def pick(values: Sequence[Any]) -> list[Any]:
        return [values[i] for i in order] if values else []

    return replace(rows, rows=pick(rows.rows), names=pick(rows.names), items=pick(rows.items))


# --- jsonpath ----------------------------------------------------------------------------------------

_STEP = re.compile(r"\.\.([^.\[\]{}\s]+)|\.\*|\[\*\]|\[(-?\d+)\]|\[(['\"])(.*?)\3\]|\.([^.\[\]{}\s]+)|\.")


class JsonPath:
    """kubectl's JSONPath templates, the part scripts use: `{.jobs[*].id}`, `{.a['b-c'][0]}`, literal text
    between fields, `{"\\n"}`, `{range .jobs[*]}{.id}{"\\t"}{.state}{"\\n"}{end}`, `..name` (anywhere).
    Several values of one field are joined by a space; a field that is not there prints nothing (as
    kubectl with --allow-missing-template-keys, its default). A template without braces is one field.
    """

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts  # str (literal) | list[step] (a field) | ("range", steps, parts)

    @classmethod
    def compile(cls, template: str) -> JsonPath:
        text = template.strip()
        if "{" not in text:
            text = "{" + text + "}"
        parts, rest = cls._parse(text, 0, template)
        if rest != len(text):
            raise typer.BadParameter(
                f"jsonpath {template!r}: {{end}} without {{range}}", param_hint="--output"
            )
        return cls(parts)

    @classmethod
    def _parse(cls, text: str, pos: int, template: str) -> tuple[list[Any], int]:
        parts: list[Any] = []
        while pos < len(text):
            start = text.find("{", pos)
            literal = text[pos : start if start >= 0 else len(text)]
            if literal:
                parts.append(literal.replace("\\n", "\n").replace("\\t", "\t"))
            if start < 0:
                return parts, len(text)
            end = text.find("}", start)
            if end < 0:
                raise typer.BadParameter(f"jsonpath {template!r}: unclosed {{", param_hint="--output")
            body = text[start + 1 : end].strip()
            pos = end + 1
            if body == "end":
                return parts, start
            if body.startswith("range "):
                inner, stop = cls._parse(text, pos, template)
                if text[stop : stop + 5] != "{end}":
                    raise typer.BadParameter(
                        f"jsonpath {template!r}: {{range}} without {{end}}", param_hint="--output"
                    )
                parts.append(("range", cls._steps(body[6:].strip(), template), inner))
                pos = stop + 5
            elif len(body) >= 2 and body[0] == body[-1] and body[0] in "\"'":
                parts.append(body[1:-1].replace("\\n", "\n").replace("\\t", "\t"))
            else:
                parts.append(cls._steps(body, template))
        return parts, pos

    @staticmethod
    def _steps(path: str, template: str) -> list[tuple[str, Any]]:
        path = path.removeprefix("$")
        steps: list[tuple[str, Any]] = []
        pos = 0
        while pos < len(path):
            m = _STEP.match(path, pos)
            if not m or m.end() == pos:
                raise typer.BadParameter(
                    f"jsonpath {template!r}: cannot read {path[pos:]!r}", param_hint="--output"
                )
            token = m.group(0)
            if m.group(1) is not None:  # ..name: the field wherever it is below
                steps += [("deep", None), ("key", m.group(1))]
            elif token in (".*", "[*]"):
                steps.append(("all", None))
            elif m.group(2) is not None:
                steps.append(("index", int(m.group(2))))
            elif m.group(4) is not None:
                steps.append(("key", m.group(4)))
            elif m.group(5) is not None:
                steps.append(("key", m.group(5)))
            pos = m.end()
        return steps

    @staticmethod
    def _walk(values: list[Any], steps: list[tuple[str, Any]]) -> list[Any]:
        for op, arg in steps:
            found: list[Any] = []
            for value in values:
                if (op == "key" and isinstance(value, dict) and arg in value) or (
                    op == "index" and isinstance(value, list) and -len(value) <= arg < len(value)
                ):
                    found.append(value[arg])
                elif op == "all":
                    found.extend(
                        value.values()
                        if isinstance(value, dict)
                        else value
                        if isinstance(value, list)
                        else []
                    )
                elif op == "deep":
                    found.extend(_descendants(value))
            values = found
        return values

    def values(self, data: Any) -> list[Any]:
        """The values of the template's first field (what --sort-by .field compares)."""
        steps = next(p for p in self.parts if isinstance(p, list))
        return self._walk([data], steps)

    def render(self, data: Any) -> str:
        return "".join(self._render(self.parts, data))

    def _render(self, parts: list[Any], data: Any) -> list[str]:
        out: list[str] = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, tuple):
                for item in self._walk([data], part[1]):
                    out += self._render(part[2], item)
            else:
                out.append(" ".join(_text(v) for v in self._walk([data], part)))
        return out


def _descendants(value: Any) -> list[Any]:
    found = [value]
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    for child in children:
        found += _descendants(child)
    return found


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --- writing -----------------------------------------------------------------------------------------


def dump(data: Any, fmt: Format) -> str:
    """JSON (indented) or YAML (keys in the answer's order), without a trailing newline."""
    if fmt is Format.YAML:
        import yaml

        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n")
    return json.dumps(data, indent=2, ensure_ascii=False)


def show(renderable: RenderableType) -> None:
    """Print for people: as wide as the content when stdout is not a terminal, so nothing is cut."""
    console = stdout
    if not stdout.is_terminal:
        # A console's own width caps what print may use, hence one as wide as the content.
        natural = Measurement.get(stdout, stdout.options.update_width(UNBOUNDED), renderable).maximum
        console = Console(file=stdout.file, highlight=False, width=max(natural, stdout.width))
    console.print(renderable)


def _machine(out: Output, data: Any) -> None:
    # Plain echo: rich would wrap long lines and style the text, which breaks parsers.
    if out.format is Format.JSONPATH:
        text = JsonPath.compile(out.template).render(data)
        typer.echo(text, nl=not text.endswith("\n"))  # a template ending in {"\n"} gets no blank line
    else:
        typer.echo(dump(data, out.format))


def emit_rows(
    out: Output,
    data: Any,
    rows: Rows,
    *,
    no_headers: bool = False,
    sort_by: str = "",
    more: Sequence[Rows] = (),
) -> None:
    """`rows` as a table, names or CSV; `data` (the whole answer) as JSON, YAML or through jsonpath.

    --sort-by orders all forms alike: the table's rows and the items under `data[rows.key]`. `more` are
    further tables for people after a blank line (a route's exclusions); scripts find them in `data`.
    """
    rows = sorted_rows(rows, sort_by)
    if sort_by and rows.key and isinstance(data, dict):
        data = {**data, rows.key: unique_items(rows.items)}
    fmt = out.format
    if fmt is Format.CSV:
        typer.echo(rows_csv(rows, headers=not no_headers), nl=False)
    elif fmt is Format.NAME:
        names = list(dict.fromkeys(rows.names)) if rows.names else [plain_text(row[0]) for row in rows.rows]
        for name in names:
            typer.echo(f"{rows.kind}/{name}" if rows.kind else name)
    elif out.human:
        for n, section in enumerate((rows, *more)):
            if n and not no_headers:
                stdout.print()
            if section.title and not no_headers:
                stdout.print(Text(section.title), soft_wrap=True)
            show(rows_table(section, wide=fmt is Format.WIDE, headers=not no_headers))
    else:
        _machine(out, data)


def emit(out: Output, data: Any, detail: RenderableType, *, name: str = "") -> None:
    """One object: `detail` for people (table and wide alike), `data` for scripts, `name` for -o name."""
    if out.format is Format.CSV:
        raise typer.BadParameter("csv is for lists; use json, yaml or jsonpath", param_hint="--output")
    if out.format is Format.NAME:
        if not name:
            raise typer.BadParameter("this answer has no name; use json or yaml", param_hint="--output")
        typer.echo(name)
    elif out.human:
        show(detail)
    else:
        _machine(out, data)


def note(message: str) -> None:
    """A hint for people (more pages, how to continue) on stderr, so stdout stays the answer alone."""
    typer.echo(message, err=True)
