"""How many of KubeBlocks' real ConfigConstraints and ParametersDefinitions we accept
unchanged (issue 24), why not the rest, and whether every listed parameter gets
KubeBlocks' class.

Run: ``python bench/kubeblocks_corpus.py [MIRROR] [--fixture FILE]``, where MIRROR is a
bare git directory of apecloud/kubeblocks-addons (the ``fetch`` tool's
``/work/.mirror/apecloud+kubeblocks-addons/repo``; ``git clone --mirror`` makes the same).

The corpus: every ``ConfigConstraint`` (``apps.kubeblocks.io/v1beta1``) of the addons'
charts on branch ``release-0.9`` (the last release that ships them; later releases moved
to ParametersDefinitions) and every ``ParametersDefinition``
(``parameters.kubeblocks.io/v1alpha1``) at ``HEAD``. Charts are Helm templates: each file
is rendered by ``bench/helm_lite.py`` (the subset of Helm these files use) with the
chart's ``values.yaml`` and ``Chart.yaml`` and its own files (``.Files.Get``), then split
into YAML documents. A file that cannot be rendered is counted with the construct that
stopped it.

Each object is loaded with :func:`federation.rollouts.kubeblocks.load`; a refusal is
counted under its field and reason. For every accepted object, every listed parameter's
class is compared with :func:`kubeblocks_class`, a reading of KubeBlocks' own rule written
apart from ours. ``--fixture FILE`` writes the rendered objects, CUE text dropped (it is
long and we do not evaluate it), as the JSON fixture the unit test
``tests/unit/rollouts/test_kubeblocks_corpus.py`` runs the same checks on (Apache-2.0, from
kubeblocks-addons; origin in ``tests/fixtures/kubeblocks/README.md``).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import helm_lite

from federation.rollouts import kubeblocks

MIRROR = "/work/.mirror/apecloud+kubeblocks-addons/repo"
SOURCES = (("release-0.9", "ConfigConstraint"), ("HEAD", "ParametersDefinition"))


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True,
                          capture_output=True, text=True).stdout


def show(mirror: str, ref: str, path: str) -> str | None:
    result = subprocess.run(["git", f"--git-dir={mirror}", "show", f"{ref}:{path}"],
                            capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else None


def template_files(mirror: str, ref: str, kind: str) -> list[str]:
    out = git(mirror, "grep", "-l", f"kind: {kind}$", ref, "--", "addons/*/templates/*")
    return sorted(line.split(":", 1)[1] for line in out.splitlines())


def render(mirror: str, ref: str, path: str) -> str:
    chart = PurePosixPath(path).parents[1]
    values = yaml.safe_load(show(mirror, ref, f"{chart}/values.yaml") or "") or {}
    meta = yaml.safe_load(show(mirror, ref, f"{chart}/Chart.yaml") or "") or {}
    renderer = helm_lite.Renderer(lambda name: show(mirror, ref, f"{chart}/{name}"),
                                  values, meta)
    return renderer.render(show(mirror, ref, path) or "")


def objects(mirror: str, failures: collections.Counter[str]
            ) -> Iterator[tuple[str, dict[str, Any]]]:
    for ref, kind in SOURCES:
        for path in template_files(mirror, ref, kind):
            try:
                documents = list(yaml.safe_load_all(render(mirror, ref, path)))
            except helm_lite.Unsupported as err:
                failures[f"{kind}: not rendered ({err})"] += 1
                continue
            except yaml.YAMLError as err:
                failures[f"{kind}: rendered, not YAML ({type(err).__name__})"] += 1
                continue
            for doc in documents:
                if isinstance(doc, dict) and doc.get("kind") == kind:
                    yield f"{ref}:{path}", doc


def kubeblocks_class(spec: Mapping[str, Any], name: str) -> str:
    """KubeBlocks' class of a parameter: immutable if listed so (any change refused);
    static if in the static list (IsUpdateDynamicParameters restarts); else
    IsDynamicParameter: with a dynamic list, dynamic iff listed; with only a static list,
    dynamic; with neither, static."""
    dynamic = spec.get("dynamicParameters") or []
    static = spec.get("staticParameters") or []
    if name in (spec.get("immutableParameters") or []):
        return "immutable"
    if name in static:
        return "static"
    if dynamic:
        return "dynamic" if name in dynamic else "static"
    return "dynamic" if static else "static"


def check(doc: Mapping[str, Any]) -> tuple[str | None, int]:
    """(refusal or None, parameters whose class differs from KubeBlocks')."""
    try:
        loaded = kubeblocks.load(doc)
    except kubeblocks.Refused as err:
        return str(err), 0
    spec = doc["spec"]
    names = {n for key in ("dynamicParameters", "staticParameters", "immutableParameters")
             for n in spec.get(key) or []}
    wrong = sum(1 for n in names if loaded.spec.classify(n).value != kubeblocks_class(spec, n))
    return None, wrong


def slim(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The object for the fixture: CUE text replaced by a marker, metadata by its name."""
    spec = json.loads(json.dumps(doc.get("spec") or {}))
    schema = spec.get("parametersSchema")
    if isinstance(schema, dict) and schema.get("cue"):
        schema["cue"] = "<CUE text dropped from the fixture>"
    return {"apiVersion": doc.get("apiVersion"), "kind": doc.get("kind"),
            "metadata": {"name": (doc.get("metadata") or {}).get("name")}, "spec": spec}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mirror", nargs="?", default=MIRROR)
    parser.add_argument("--fixture", type=Path)
    args = parser.parse_args()
    failures: collections.Counter[str] = collections.Counter()
    refusals: collections.Counter[str] = collections.Counter()
    by_kind: collections.Counter[str] = collections.Counter()
    accepted = wrong_total = 0
    kept: list[dict[str, Any]] = []
    found = list(objects(args.mirror, failures))
    for origin, doc in found:
        by_kind[doc["kind"]] += 1
        refusal, wrong = check(doc)
        kept.append({"origin": origin, **slim(doc)})
        if refusal is None:
            accepted += 1
            wrong_total += wrong
        else:
            refusals[f"{doc['kind']}: {refusal}"] += 1
    print(f"objects rendered: {len(found)} ({', '.join(f'{n} {k}' for k, n in by_kind.items())})")
    print(f"not rendered: {sum(failures.values())}")
    for reason, count in failures.most_common():
        print(f"  {count:3}  {reason}")
    print(f"accepted unchanged: {accepted}/{len(found)}")
    print(f"parameters classified unlike KubeBlocks in accepted objects: {wrong_total}")
    print("refused:")
    for reason, count in refusals.most_common():
        print(f"  {count:3}  {reason}")
    if args.fixture is not None:
        lines = ",\n".join(json.dumps(doc, sort_keys=True) for doc in kept)
        args.fixture.write_text(f"[\n{lines}\n]\n")


if __name__ == "__main__":
    main()
