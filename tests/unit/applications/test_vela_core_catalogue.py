"""vela-core's internal definitions: the table in docs/applications.md, the catalogue in
``federation/applications/vela_core.py``, the code's registries and the upstream list
(a bare mirror of kubevela/kubevela, when there is one) all say the same thing."""

from __future__ import annotations

import collections
import re
import subprocess
from pathlib import Path

import pytest

from federation.applications import model, render, vela_core

ROOT = Path(__file__).resolve().parents[3]
MIRROR = Path("/work/.mirror/kubevela+kubevela/repo")
_ROW = re.compile(r"^\| (component|trait|policy|workflowstep) \| `([^`]+)` \| (.*) \|$")


def documented() -> dict[tuple[str, str], str]:
    """(kind, name) -> "built in", "added" or "refused", from the docs' table."""
    rows: dict[tuple[str, str], str] = {}
    for line in (ROOT / "docs/applications.md").read_text().splitlines():
        match = _ROW.match(line)
        if match:
            status = match[3].split(":")[0].split(" (")[0].strip()
            assert (match[1], match[2]) not in rows, f"{match[2]} listed twice"
            rows[(match[1], match[2])] = status
    return rows


def upstream() -> set[tuple[str, str]]:
    listing = subprocess.run(
        ["git", "--git-dir", str(MIRROR), "ls-tree", "-r", "--name-only", "HEAD",
         "vela-templates/definitions/internal"], check=True, capture_output=True,
        text=True).stdout
    return {(path.split("/")[-2], path.split("/")[-1].removesuffix(".cue"))
            for path in listing.split() if path.endswith(".cue")}


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no mirror of kubevela/kubevela at "
                    f"{MIRROR} (the fetch tool's; git clone --mirror makes one)")
def test_every_upstream_definition_is_in_the_table() -> None:
    missing = upstream() - set(documented())
    assert not missing, f"vela-core definitions missing from docs/applications.md: {missing}"


def test_the_table_is_the_catalogue() -> None:
    rows = documented()
    assert len(rows) >= 78
    built = {(k, n) for k, names in vela_core.BUILT_IN.items() for n in names}
    refused = {(k, n) for k, names in vela_core.REFUSED.items() for n in names}
    assert {key for key, status in rows.items() if status in ("built in", "added")} == built
    assert {key for key, status in rows.items() if status == "refused"} == refused
    assert set(rows) == built | refused


def test_the_counts_in_the_text_are_the_tables() -> None:
    """The sentence above the table says how many of each (it had gone stale once)."""
    counts = collections.Counter(documented().values())
    text = " ".join((ROOT / "docs/applications.md").read_text().split())
    said = re.search(r"(\d+) were built in, (\d+) are added since, (\d+) are refused", text)
    assert said is not None
    assert tuple(int(n) for n in said.groups()) == (
        counts["built in"], counts["added"], counts["refused"])


def test_the_catalogue_is_what_the_code_registers() -> None:
    registries = {"component": {*model.COMPONENT_TYPES, *render._TYPES, *render._APP_TYPES},
                  "trait": {*model.TRAIT_TYPES, *render._TRAITS, *render._APP_TRAITS},
                  "policy": set(model.POLICY_TYPES), "workflowstep": set(model.STEP_TYPES)}
    for kind, names in vela_core.BUILT_IN.items():
        assert set(names) <= registries[kind], kind
        assert not set(vela_core.REFUSED[kind]) & registries[kind], kind
    # helmchart is rendered by Helm through definitions.Rendering's evaluations
    assert set(render._TYPES) | set(render._APP_TYPES) == set(model.COMPONENT_TYPES) - {
        "helmchart"}
    assert set(render._TRAITS) | set(render._APP_TRAITS) == set(model.TRAIT_TYPES)


@pytest.mark.parametrize(("spec", "words"), [
    ({"components": [], "workflow": {"steps": [{"name": "s", "type": "stand-in"}]}},
     r"steps\[0\]\.type: 'stand-in' is not a built-in step \(vela-core's workflowstep "
     r"stand-in: the reason"),
    ({"components": [{"name": "c", "type": "myworker"}]},
     r"'myworker' is not a built-in type \(webservice, "),
])
def test_a_refused_definition_is_refused_with_its_reason(
        spec: dict[str, object], words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """(The refused steps are being built in one by one: a stand-in.)"""
    monkeypatch.setitem(vela_core.REFUSED["workflowstep"], "stand-in", "the reason")
    with pytest.raises(model.AppError, match=words):
        model.parse_spec(spec)


def test_an_external_policy_of_a_refused_type_names_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """(No vela-core policy is refused since take-over was built in: a stand-in.)"""
    monkeypatch.setitem(vela_core.REFUSED["policy"], "stand-in", "the reason")
    with pytest.raises(model.AppError, match="'stand-in' is not a built-in policy "
                                             r"\(vela-core's policy stand-in: the reason"):
        model.external_policy({"apiVersion": "core.oam.dev/v1alpha1", "kind": "Policy",
                               "metadata": {"name": "p", "namespace": "ns"},
                               "type": "stand-in", "properties": {}})
