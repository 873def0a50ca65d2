"""Closed parameter shapes: unknown keys, wrong types and defaults, each by its path."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import shapes
from federation.applications.model import AppError
from federation.applications.shapes import STRINGS_MAP, Default, Either, Enum, Range

SHAPE = {"name": str, "size?": Range(1, 10), "mode": Default(Enum("a", "b"), "a"),
         "labels?": STRINGS_MAP, "ratio?": float, "on?": bool,
         "amount?": Either((float, str), "a number or a string"), "items?": [{"k": int}]}


def test_defaults_filled_and_optional_keys_left_out() -> None:
    assert shapes.check({"name": "x"}, SHAPE, "p") == {"name": "x", "mode": "a"}
    full = {"name": "x", "size": 3, "mode": "b", "labels": {"a": "b"}, "ratio": 0.5,
            "on": False, "amount": "1Gi", "items": [{"k": 1}]}
    assert shapes.check(full, SHAPE, "p") == full
    assert shapes.check({"name": "x", "mode": None}, SHAPE, "p")["mode"] == "a"


@pytest.mark.parametrize(("value", "words"), [
    ({}, r"^p\.name: required$"),
    ({"name": "x", "nmae": 1}, r"^p\.nmae: not supported \(amount, items, labels, "),
    ({"name": 1}, r"^p\.name: must be a string$"),
    ({"name": "x", "size": 11}, r"^p\.size: must be an integer from 1 to 10$"),
    ({"name": "x", "size": True}, r"^p\.size: must be an integer"),
    ({"name": "x", "mode": "c"}, r"^p\.mode: must be one of a, b$"),
    ({"name": "x", "labels": {"a": 1}}, r"^p\.labels: must be a map of strings$"),
    ({"name": "x", "ratio": "1"}, r"^p\.ratio: must be a number$"),
    ({"name": "x", "on": "yes"}, r"^p\.on: must be true or false$"),
    ({"name": "x", "amount": [1]}, r"^p\.amount: must be a number or a string$"),
    ({"name": "x", "items": {"k": 1}}, r"^p\.items: must be a list$"),
    ({"name": "x", "items": [{"k": "1"}]}, r"^p\.items\[0\]\.k: must be an integer"),
    ("name", r"^p: must be a map$"),
])
def test_refusals_name_the_path(value: Any, words: str) -> None:
    with pytest.raises(AppError, match=words):
        shapes.check(value, SHAPE, "p")


def test_an_unknown_shape_is_a_bug_not_bad_input() -> None:
    with pytest.raises(TypeError):
        shapes.check(1, object(), "p")
