"""`-l` label selectors and queue subtrees."""

from __future__ import annotations

import pytest
import typer

from suanli.cli.selectors import Selector, in_subtree

LABELS = {"team": "vision", "tier": "prod", "gpu": "a100"}


@pytest.mark.parametrize(
    ("given", "matches"),
    [
        ([], True),
        (["team=vision"], True),
        (["team==vision"], True),
        (["team=nlp"], False),
        (["team!=nlp"], True),
        (["team!=vision"], False),
        (["tier"], True),
        (["!tier"], False),
        (["!owner"], True),
        (["owner!=bob"], True),  # a missing label differs from any value, as in kubectl
        (["team=vision,tier=prod"], True),
        (["team=vision", "tier=dev"], False),
        (["team="], False),
    ],
)
def test_selector_terms(given: list[str], matches: bool) -> None:
    assert Selector.parse(given).matches(LABELS) is matches


@pytest.mark.parametrize("given", ["=x", "a=b=c", "!a=b", "a b", ","])
def test_selector_refuses_what_it_cannot_read(given: str) -> None:
    with pytest.raises(typer.BadParameter, match="key=value"):
        Selector.parse([given])


def test_subtree_holds_the_root_and_what_is_below_it() -> None:
    below = in_subtree("acme")
    assert [q for q in ("acme", "acme/vision", "acme/vision/x", "acmex", "globex") if below(q)] == [
        "acme",
        "acme/vision",
        "acme/vision/x",
    ]
    assert in_subtree("acme/")("acme/ops")
