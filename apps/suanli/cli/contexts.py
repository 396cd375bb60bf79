"""`suanli config ...`: the client config's contexts, as `kubectl config` handles a kubeconfig.

Every command works on the file `suanli.cli.config.config_path()` names (``--config``, else
``SUANLI_CONFIG``, else ``~/.config/suanli/config.yaml``, or the legacy ``~/.suanli/config.yaml`` while
only that exists). Tokens are never printed: `get-contexts` says whether
a context has one, `view` shows it as ``REDACTED``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from suanli.cli import config
from suanli.cli.client import EXIT_REFUSED, EXIT_USAGE, Failure, fail
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows

app = typer.Typer(
    no_args_is_help=True,
    help="Client config contexts: servers and token (get-contexts, use-context, set-context, view).",
)

NameArgument = Annotated[str, typer.Argument(help="The context's name.")]
REDACTED = "REDACTED"


def _document() -> tuple[Path, dict[str, Any]]:
    path = config.config_path()
    try:
        return path, config.read_config(path)
    except config.ConfigError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None


def _entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in data.get("contexts") or [] if isinstance(c, dict) and c.get("name")]


def _named(path: Path, data: dict[str, Any], name: str) -> dict[str, Any]:
    found = next((c for c in _entries(data) if c["name"] == name), None)
    if found is None:
        known = ", ".join(sorted(c["name"] for c in _entries(data))) or "none"
        raise fail(Failure(f"{path}: no context {name!r} (known: {known})", EXIT_REFUSED))
    return found


@app.command("get-contexts")
def get_contexts(
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
) -> None:
    """List the contexts; the current one is marked with *."""
    _, data = _document()
    current = data.get("current-context")
    entries = _entries(data)
    rows = Rows(
        ("current", "name", "scheduler", "billing", "routing", "tls", "token"),
        [
            (
                "*" if c["name"] == current else "",
                c["name"],
                c.get("scheduler", ""),
                c.get("billing", ""),
                c.get("routing", ""),
                "yes" if c.get("ca") else "no",
                "yes" if c.get("token") or c.get("token-file") else "no",
            )
            for c in entries
        ],
        kind="context",
        names=[c["name"] for c in entries],
        items=[_redacted(c) for c in entries],
        key="contexts",
    )
    answer = {"current-context": current, "contexts": [_redacted(c) for c in entries]}
    emit_rows(output, answer, rows, no_headers=no_headers, sort_by=sort_by)


@app.command("current-context")
def current_context() -> None:
    """Print the current context's name."""
    path, data = _document()
    current = data.get("current-context")
    if not current:
        raise fail(Failure(f"{path}: no current context (suanli config use-context NAME)", EXIT_REFUSED))
    typer.echo(current)


@app.command("use-context")
def use_context(name: NameArgument) -> None:
    """Make NAME the current context."""
    path, data = _document()
    _named(path, data, name)
    data["current-context"] = name
    config.save_config(path, data)
    typer.echo(f'Switched to context "{name}".')


@app.command("set-context")
def set_context(
    name: NameArgument,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Scheduler HOST:PORT.")] = None,
    billing: Annotated[str | None, typer.Option("--billing", help="Billing HOST:PORT.")] = None,
    routing: Annotated[str | None, typer.Option("--routing", help="Routing HOST:PORT.")] = None,
    traces: Annotated[
        str | None, typer.Option("--traces", help="Jaeger query API URL (`suanli job trace`).")
    ] = None,
    serving: Annotated[str | None, typer.Option("--serving", help="Serving HOST:PORT.")] = None,
    token: Annotated[str | None, typer.Option("--token", help="Access token to send.")] = None,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="Read the token from this file on every call.")
    ] = None,
    ca: Annotated[Path | None, typer.Option("--ca", help="CA certificate to trust (TLS).")] = None,
    use: Annotated[bool, typer.Option("--use", help="Also make it the current context.")] = False,
) -> None:
    """Create context NAME, or change the fields given (the others are kept)."""
    if token is not None and token_file is not None:
        raise fail(Failure("--token and --token-file: give one of them", EXIT_USAGE))
    path, data = _document()
    entries = _entries(data)
    entry = next((c for c in entries if c["name"] == name), None) or {"name": name}
    for key, value in (
        ("scheduler", scheduler),
        ("billing", billing),
        ("routing", routing),
        ("traces", traces),
        ("serving", serving),
    ):
        if value is not None:
            entry[key] = value
    if token is not None:
        entry.pop("token-file", None)
        entry["token"] = token
    if token_file is not None:
        entry.pop("token", None)
        entry["token-file"] = str(token_file.expanduser().resolve())
    if ca is not None:
        entry["ca"] = str(ca.expanduser().resolve())
    data["contexts"] = [*(c for c in entries if c["name"] != name), entry]
    if use or not data.get("current-context"):
        data["current-context"] = name
    config.save_config(path, data)
    typer.echo(f'Context "{name}" written to {path}.')


@app.command("delete-context")
def delete_context(name: NameArgument) -> None:
    """Remove context NAME (if it was current, no context is current any more)."""
    path, data = _document()
    _named(path, data, name)
    data["contexts"] = [c for c in _entries(data) if c["name"] != name]
    if data.get("current-context") == name:
        data.pop("current-context")
    config.save_config(path, data)
    typer.echo(f'Deleted context "{name}" from {path}.')


@app.command("view")
def view() -> None:
    """Print the config file, tokens redacted."""
    _, data = _document()
    shown = {**data, "contexts": [_redacted(c) for c in _entries(data)]}
    typer.echo(yaml.safe_dump(shown, sort_keys=False), nl=False)


def _redacted(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: (REDACTED if k == "token" else v) for k, v in entry.items()}
