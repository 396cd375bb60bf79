"""Reading the price book from YAML; a bad file is refused with the path of the offending field."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from suanli.resources.pricebook import PriceBook


class PriceBookError(ValueError):
    """The price book cannot be used; the message names the file and the field."""


def parse_pricebook(data: object, source: str = "<price book>") -> PriceBook:
    """Validate a parsed document as a price book; `PriceBookError` names ``source`` and the field."""
    try:
        return PriceBook.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(err["loc"], err["msg"]) for err in exc.errors())
        raise PriceBookError(f"{source}: {problems}") from None


def load_pricebook(path: str | Path) -> PriceBook:
    """Read and validate the price book YAML at ``path``; `PriceBookError` says what is wrong where."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PriceBookError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PriceBookError(f"{path}: not valid YAML: {exc}") from None
    return parse_pricebook(data, str(path))


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    message = message.removeprefix("Value error, ")
    # Cross-field checks name their own field path in the message.
    return f"{_location(loc)}: {message}" if loc else message


def _location(loc: tuple[int | str, ...]) -> str:
    # ('versions', 0, 'rates', 2, 'cu_hour') -> versions[0].rates[2].cu_hour
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
