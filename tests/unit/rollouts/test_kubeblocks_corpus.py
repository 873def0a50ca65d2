"""KubeBlocks' own objects, unchanged (issue 24's first "done when"): the corpus rendered
from kubeblocks-addons' charts (tests/fixtures/kubeblocks/corpus.json, written by
bench/kubeblocks_corpus.py) loads as KubeBlocks would have it, and every listed parameter
of every accepted object gets KubeBlocks' class, by a reading of KubeBlocks' rule written
here apart from ours."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from federation.rollouts import kubeblocks

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "kubeblocks" / "corpus.json"
LISTS = ("dynamicParameters", "staticParameters", "immutableParameters")


def kubeblocks_class(spec: dict[str, Any], name: str) -> str:
    """KubeBlocks' class (pkg/parameters: immutable refuses any change; the static list
    restarts; IsDynamicParameter: with a dynamic list, dynamic iff listed; with only a
    static list, dynamic; with neither, static)."""
    dynamic, static = spec.get("dynamicParameters") or [], spec.get("staticParameters") or []
    if name in (spec.get("immutableParameters") or []):
        return "immutable"
    if name in static:
        return "static"
    if dynamic:
        return "dynamic" if name in dynamic else "static"
    return "dynamic" if static else "static"


def outcomes() -> tuple[list[tuple[dict[str, Any], kubeblocks.Loaded]], collections.Counter[str]]:
    accepted: list[tuple[dict[str, Any], kubeblocks.Loaded]] = []
    refused: collections.Counter[str] = collections.Counter()
    for doc in json.loads(CORPUS.read_text()):
        try:
            accepted.append((doc, kubeblocks.load(doc)))
        except kubeblocks.Refused as err:
            refused[err.field] += 1
    return accepted, refused


def test_the_corpus_is_accepted_unchanged_but_for_named_fields() -> None:
    accepted, refused = outcomes()
    assert len(accepted) + sum(refused.values()) == 141
    assert len(accepted) == 133
    assert refused == {"spec.reloadAction.targetPodSelector": 8}


def test_every_listed_parameter_gets_kubeblocks_class() -> None:
    accepted, _ = outcomes()
    compared = 0
    for doc, loaded in accepted:
        spec = doc["spec"]
        for name in {n for key in LISTS for n in spec.get(key) or []}:
            assert loaded.spec.classify(name).value == kubeblocks_class(spec, name), \
                (doc["origin"], name)
            compared += 1
    assert compared > 5000  # the lists are long: MySQL alone lists hundreds


def test_the_corpus_exercises_the_rules_that_changed() -> None:
    """The corpus holds what issue 24 found refused or misclassified before."""
    accepted, _ = outcomes()
    specs = [doc["spec"] for doc, _ in accepted]
    assert any(s.get("fileFormatConfig", {}).get("iniConfig") for s in specs)
    assert any(s.get("staticParameters") and not s.get("dynamicParameters") for s in specs)
    assert any(set(s.get("staticParameters") or []) & set(s.get("immutableParameters") or [])
               for s in specs)
    formats = {s["fileFormatConfig"]["format"] for s in specs}
    assert {"props-plus", "redis", "props-ultra", "xml", "ini", "toml"} <= formats
