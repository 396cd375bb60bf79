"""What `-l` selectors and queue subtrees keep: filters a list command applies to what the server sent.

`-l` takes kubectl's equality selectors: `key=value` (or `==`), `key!=value`, `key` (has the label) and
`!key` (has not), comma-separated or repeated; every term must hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

import typer

_TERM = re.compile(r"^(?P<not>!)?(?P<key>[^=!\s]+)(?:(?P<op>==|=|!=)(?P<value>[^=!\s]*))?$")

SelectorOption = Annotated[
    list[str] | None,
    typer.Option(
        "--selector",
        "-l",
        metavar="KEY=VALUE",
        help="Only items whose labels match: key=value, key!=value, key, !key (comma-separated or repeated).",
        show_default=False,
    ),
]


@dataclass(frozen=True, slots=True)
class Term:
    key: str
    op: str  # "=", "!=", "exists", "absent"
    value: str = ""

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "absent":
            return self.key not in labels
        if self.op == "=":
            return labels.get(self.key) == self.value
        return labels.get(self.key) != self.value


@dataclass(frozen=True, slots=True)
class Selector:
    terms: tuple[Term, ...] = ()

    @classmethod
    def parse(cls, given: Sequence[str] | None) -> Selector:
        terms = []
        for text in given or ():
            for part in (p.strip() for p in text.split(",")):
                found = _TERM.match(part)
                if not part or not found or (found["not"] and found["op"]):
                    raise typer.BadParameter(
                        f"{part!r}: key=value, key!=value, key or !key", param_hint="--selector"
                    )
                if found["op"] is None:
                    terms.append(Term(found["key"], "absent" if found["not"] else "exists"))
                else:
                    terms.append(Term(found["key"], "!=" if found["op"] == "!=" else "=", found["value"]))
        return cls(tuple(terms))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(term.holds(labels) for term in self.terms)


def in_subtree(root: str) -> Callable[[str], bool]:
    """Whether a queue is `root` or below it (`acme` holds `acme/vision`, not `acmex`)."""
    root = root.rstrip("/")
    return lambda queue: queue == root or queue.startswith(root + "/")
