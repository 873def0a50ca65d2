"""How many of KubeVela's own Applications ``fedctl app dry-run`` accepts, and why not the rest.

Run: ``python bench/vela_corpus.py MIRROR [MIRROR...] [--show N] [--workdir DIR]``, where
each MIRROR is a bare git directory of one of KubeVela's repositories (the ``fetch`` tool's
``/work/.mirror/kubevela+kubevela/repo``, ``kubevela+kubevela.io/repo``,
``kubevela+catalog/repo``; ``git clone --mirror`` makes the same). Nothing upstream is
kept in this repository: CI has no network, and the corpus is KubeVela's to publish.

What it reads (``git ls-tree``/``git show`` of HEAD, no work tree): every ``.yaml``/``.yml``
file, and every fenced ``yaml`` block of the ``.md``/``.mdx`` pages (the documentation
site's examples live there; of kubevela.io only ``docs/``, the current version in English,
so a page and its translations and older versions count once). Each YAML document of kind
``Application`` (``core.oam.dev/v1beta1``) is one candidate, deduplicated by its spec;
``Policy`` and ``Workflow`` documents of the same file go with it (its external
policies, the Workflow its ``workflow.ref`` names), as dry-run reads them, and so do the
definitions (ComponentDefinition, TraitDefinition...) of every file of its directory:
KubeVela's examples keep them beside the Application
(``docs/examples/application/template.yaml`` next to ``app.yaml``), or in a
``definitions`` directory beside it; dry-run takes one without a namespace as
``vela-system``'s.

Which KubeVela would accept (:func:`upstream_problem`): a document KubeVela's API server
would refuse (the CRD's required fields, a list that is not a list, a name its admission
webhook finds twice), one whose YAML does
not parse, or one with placeholders (``<your-image>``, the load test's ``sed`` templates)
is skipped and counted apart; so is one needing an addon ``vela addon enable`` refuses.

Addons (:class:`Addons`): an Application naming a type that is neither vela-core's nor
defined beside it gets the definitions of the catalog addon providing it, as ``vela addon
enable`` installs them (``--no-addons``: none).

How each is run: the real command (``fedctl app dry-run -f FILE --clusters CLUSTERS
--local-cluster local --target-namespaces '*'``, in process), with a clusters file holding
every cluster any Application of the corpus names (``topology.clusters``, an env-binding
env's ``clusterSelector.name``, a share-cloud-resource placement's ``cluster``) and one
cluster per label selector it uses (labelled so), plus ``local``; every namespace is
granted. So
only the Application model decides. The refusals are grouped by reason: the error line
without its file, field indices and quoted values (``spec.components[3].type: 'helm' is
not a built-in type`` is counted under ``spec.components[].type: 'helm' is not a built-in
type``, the type kept: it is the reason).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from federation.applications import definitions as definitions_
from federation.applications.definition_files import KUBEVELA_REFUSES, from_cue_file
from federation.cli import cli
from federation.untrusted import documents

JSON = dict[str, Any]
_FENCE = re.compile(r"^```ya?ml[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_HELM_E2E = "test/e2e-test/testdata/helm/"
"""vela-core's helmchart e2e Applications: ``placeholder_ns`` is replaced by the test's
namespace (test/e2e-test/helmchart_test.go) before they are applied."""
_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>]*>|\$\{|\{\{")


def files(mirror: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of the mirror's YAML files and Markdown pages at HEAD."""
    names = subprocess.run(["git", "--git-dir", str(mirror), "ls-tree", "-r", "--name-only",
                            "HEAD"], check=True, capture_output=True, text=True).stdout
    docs_site = "kubevela.io" in str(mirror)
    for name in names.splitlines():
        if docs_site and not name.startswith("docs/"):
            continue
        if not name.endswith((".yaml", ".yml", ".md", ".mdx")):
            continue
        blob = subprocess.run(["git", "--git-dir", str(mirror), "show", f"HEAD:{name}"],
                              check=True, capture_output=True).stdout
        try:
            text = documents.decode(blob)
        except documents.TextError:
            continue
        if name.startswith(_HELM_E2E):  # as helmchart_test.go fills them before applying
            text = text.replace("placeholder_ns", "helm-e2e")
        yield name, text


def yaml_texts(name: str, text: str) -> Iterator[str]:
    """The YAML of a file: itself, or each fenced yaml block of a Markdown page."""
    if name.endswith((".md", ".mdx")):
        yield from (m.group(1) for m in _FENCE.finditer(text))
    else:
        yield text


DEFINITION_KINDS = ("ComponentDefinition", "TraitDefinition", "PolicyDefinition",
                    "WorkflowStepDefinition")


def directory(where: str) -> str:
    """``mirror:dir`` of a candidate's ``mirror:path[#n]``."""
    return where.partition("#")[0].rpartition("/")[0]


def candidates(mirrors: Sequence[Path], beside: dict[str, list[JSON]] | None = None
               ) -> Iterator[tuple[str, str, list[Any]]]:
    """(where, yaml text, documents) of every YAML text holding an Application; the
    definitions of every file go to ``beside`` by :func:`directory`."""
    for mirror in mirrors:
        for name, text in files(mirror):
            for number, chunk in enumerate(yaml_texts(name, text)):
                if beside is not None and "Definition" in chunk:
                    _definitions(f"{mirror.parent.name}:{name}", chunk, beside)
                if "kind: Application" not in chunk:
                    continue
                where = f"{mirror.parent.name}:{name}" + (f"#{number}" if number else "")
                try:
                    docs = documents.yaml_documents(chunk)
                except documents.TextError:
                    yield where, chunk, []  # unparsable upstream: counted as such
                    continue
                yield where, chunk, docs


def _definitions(where: str, chunk: str, beside: dict[str, list[JSON]]) -> None:
    try:
        docs = documents.yaml_documents(chunk)
    except documents.TextError:
        return
    beside.setdefault(directory(where), []).extend(
        d for d in docs if isinstance(d, dict) and d.get("kind") in DEFINITION_KINDS
        and not _PLACEHOLDER.search(json.dumps(d, default=str)))


_ADDON_DEFINITIONS = re.compile(r"^((?:experimental/)?addons/([^/]+))/definitions/.+$")
_FIRST_LABEL = re.compile(r'^"?([A-Za-z0-9_.-]+)"?\s*:', re.MULTILINE)


@dataclasses.dataclass
class Addons:
    """The catalog's addons as ``vela addon enable`` would install their definitions:
    each addon's ``definitions/`` directory and those below it (as vela-core's reader
    lists them), ``.cue`` files converted by
    :func:`from_cue_file` (as vela-core's ``FromCUEString``), ``.yaml``/``.yml`` files as
    they are, all in ``vela-system``."""

    docs: dict[str, list[JSON]] = dataclasses.field(default_factory=dict)
    """addon path -> its definition objects."""
    provider: dict[str, str] = dataclasses.field(default_factory=dict)
    """type name -> the addon defining it (``addons/`` before ``experimental/addons/``)."""
    unconverted: dict[str, str] = dataclasses.field(default_factory=dict)
    """type name -> why its ``.cue`` file does not convert (one line)."""
    unconverted_in: dict[str, str] = dataclasses.field(default_factory=dict)
    """type name -> the addon whose ``.cue`` file for it does not convert."""
    not_enabled: dict[str, str] = dataclasses.field(default_factory=dict)
    """addon path -> why ``vela addon enable`` itself fails on it (a definition vela-core's
    conversion refuses: the whole addon is not installed)."""

    def needed(self, app: JSON, known: set[str]) -> list[str]:
        """The addons an Application needs: those providing a type it names that is
        neither vela-core's nor defined beside it."""
        return sorted({self.provider[t] for t in types_of(app) - known if t in self.provider})

    def upstream_problem(self, app: JSON, known: set[str]) -> str | None:
        """Why KubeVela could not run ``app``: an addon it needs does not enable there."""
        wanted = types_of(app) - known
        addons = {*self.needed(app, known),
                  *(self.unconverted_in[t] for t in wanted if t in self.unconverted_in)}
        return next((f"needs addon {a}, which vela addon enable refuses"
                     for a in sorted(addons) if a in self.not_enabled), None)

    def unconvertible(self, app: JSON, known: set[str]) -> str | None:
        return next((f"addon definition {t!r} not converted: {self.unconverted[t]}"
                     for t in sorted(types_of(app) - known) if t in self.unconverted
                     and t not in self.provider), None)


def addons(mirrors: Sequence[Path]) -> Addons:
    found = Addons()
    for mirror in mirrors:
        names = subprocess.run(["git", "--git-dir", str(mirror), "ls-tree", "-r",
                                "--name-only", "HEAD"], capture_output=True, text=True).stdout
        # addons/ first: an experimental addon of the same type name does not win
        for name in sorted(names.splitlines(), key=lambda n: (n.startswith("experimental"), n)):
            match = _ADDON_DEFINITIONS.match(name)
            if match and name.endswith((".cue", ".yaml", ".yml")):
                _addon_file(found, match[1], name, _show(mirror, name))
    return found


def _show(mirror: Path, name: str) -> str:
    blob = subprocess.run(["git", "--git-dir", str(mirror), "show", f"HEAD:{name}"],
                          check=True, capture_output=True).stdout
    try:
        return documents.decode(blob)
    except documents.TextError:
        return ""


def _addon_file(found: Addons, addon: str, name: str, text: str) -> None:
    docs: list[Any] = []
    if name.endswith(".cue"):
        try:
            docs = [from_cue_file(text, name)]
        except definitions_.DefinitionError as exc:
            if KUBEVELA_REFUSES in str(exc):
                found.not_enabled.setdefault(addon, str(exc))
            label = _FIRST_LABEL.search(text)
            if label and label[1] not in ("import", "package"):
                found.unconverted.setdefault(label[1], str(exc))
                found.unconverted_in.setdefault(label[1], addon)
            return
    else:
        try:
            docs = documents.yaml_documents(text)
        except documents.TextError:
            return
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in DEFINITION_KINDS or \
                not isinstance(doc.get("metadata"), dict):
            continue
        # addon enable puts every definition in vela-system, whatever the file says
        doc["metadata"] = {**doc["metadata"], "namespace": "vela-system"}
        found.docs.setdefault(addon, []).append(doc)
        found.provider.setdefault(str(doc["metadata"].get("name")), addon)


def upstream_problem(app: Any, text: str) -> str | None:
    """Why KubeVela's API server would refuse ``app`` (or it is a placeholder), or None."""
    if _PLACEHOLDER.search(text):
        return "placeholders (<...>, ${...}, {{...}})"
    meta = app.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return "no metadata.name"
    spec = app.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("components", []), list | None):
        return "spec.components not a list"
    for key, required in (("components", ("name", "type")), ("policies", ("type",))):
        for item in spec.get(key) or []:
            if not isinstance(item, dict) or not all(isinstance(item.get(f), str)
                                                     for f in required):
                return f"spec.{key}[] without {' or '.join(required)}"
    workflow = spec.get("workflow")
    if workflow is not None and not isinstance(workflow, dict):
        return "spec.workflow not a map"
    return _duplicates(spec) or _outputs_problem(spec)


def _duplicates(spec: JSON) -> str | None:
    """KubeVela's admission webhook (``application/validation.go``) refuses a component
    name or a step name used twice."""
    names = [c["name"] for c in spec.get("components") or []]
    steps = [s for s in (spec.get("workflow") or {}).get("steps") or [] if isinstance(s, dict)]
    if len(set(names)) < len(names):
        return "duplicated component name (KubeVela's webhook)"
    step_names = [s.get("name") for s in steps]
    if len(set(step_names)) < len(step_names):
        return "duplicated step name (KubeVela's webhook)"
    return None


def _outputs_problem(spec: JSON) -> str | None:
    """The CRD's ``outputs`` items require ``name`` and ``valueFrom`` (the older
    ``fromKey`` spelling is refused by KubeVela's API server)."""
    workflow = spec.get("workflow") if isinstance(spec.get("workflow"), dict) else {}
    steps = [s for s in (workflow or {}).get("steps") or [] if isinstance(s, dict)]
    steps += [sub for s in steps for sub in s.get("subSteps") or [] if isinstance(sub, dict)]
    holders = [*steps, *(c for c in spec.get("components") or [] if isinstance(c, dict))]
    for holder in holders:
        for item in holder.get("outputs") or []:
            if not isinstance(item, dict) or not all(isinstance(item.get(f), str)
                                                     for f in ("name", "valueFrom")):
                return "outputs[] without name or valueFrom"
    return None


_SED_TEMPLATES = "kubevela+kubevela:hack/load-test/app-templates/"


def _template_file(where: str) -> str | None:
    """The load test's Applications are templates its ``deploy.sh`` fills with ``sed``
    (``ID``, ``SHARD``, ``VERSION``, ``CLUSTER``): ``app-ID-vVERSION-c1`` names no
    object the API server would take."""
    return "placeholders (hack/load-test templates)" if where.startswith(_SED_TEMPLATES) \
        else None


def core_types(mirrors: Sequence[Path]) -> set[str]:
    """vela-core's built-in definitions by name (``vela-templates/definitions/internal``
    and ``deprecated`` of the kubevela mirror), or none without that mirror."""
    found: set[str] = set()
    for mirror in mirrors:
        names = subprocess.run(["git", "--git-dir", str(mirror), "ls-tree", "-r",
                                "--name-only", "HEAD", "vela-templates/definitions"],
                               capture_output=True, text=True).stdout
        for name in names.splitlines():
            if name.endswith(".cue") and ("/internal/" in name or "/deprecated/" in name):
                found.add(name.rsplit("/", 1)[1].removesuffix(".cue"))
    return found


def types_of(app: JSON) -> set[str]:
    """Every definition an Application names (components, traits, policies, steps)."""
    spec = app.get("spec") or {}
    named: set[str] = set()
    for component in spec.get("components") or []:
        named.add(str(component.get("type")))
        named.update(str(t.get("type")) for t in component.get("traits") or []
                     if isinstance(t, dict))
    named.update(str(p.get("type")) for p in spec.get("policies") or [] if isinstance(p, dict))
    workflow = spec.get("workflow") or {}
    named.update(str(s.get("type")) for s in workflow.get("steps") or [] if isinstance(s, dict))
    return named


def _topologies(spec: JSON, external: Sequence[JSON]) -> Iterator[JSON]:
    """Each topology's properties, and each env-binding env's cluster as one."""
    inline = [p for p in spec.get("policies") or [] if isinstance(p, dict)]
    for policy in [*inline, *external]:
        if not isinstance(policy.get("properties"), dict):
            continue
        if policy.get("type") == "topology":
            yield policy["properties"]
        if policy.get("type") == "env-binding":
            for env in policy["properties"].get("envs") or []:
                placement = env.get("placement") if isinstance(env, dict) else None
                selector = (placement or {}).get("clusterSelector") or {}
                if isinstance(selector, dict) and isinstance(selector.get("name"), str):
                    yield {"clusters": [selector["name"]]}
    steps = (spec.get("workflow") or {}).get("steps") if isinstance(spec.get("workflow"),
                                                                   dict) else None
    for step in steps if isinstance(steps, list) else []:
        props = step.get("properties") if isinstance(step, dict) else None
        if step.get("type") == "share-cloud-resource" and isinstance(props, dict):
            for placement in props.get("placements") or []:
                if isinstance(placement, dict) and isinstance(placement.get("cluster"), str):
                    yield {"clusters": [placement["cluster"]]}


def fleet(apps: Sequence[tuple[JSON, list[JSON]]]) -> list[JSON]:
    """Every cluster the corpus names, one per label selector, and ``local``."""
    names: set[str] = {"local"}
    selectors: list[dict[str, str]] = []
    for app, external in apps:
        for props in _topologies(app["spec"], external):
            for name in props.get("clusters") or []:
                if isinstance(name, str):
                    names.add(name)
            selector = props.get("clusterLabelSelector") or props.get("clusterSelector")
            if isinstance(selector, dict):
                labels = {str(k): str(v) for k, v in selector.items()}
                if labels not in selectors:
                    selectors.append(labels)
    clusters: list[JSON] = [{"name": n} for n in sorted(names)]
    clusters += [{"name": f"selected-{i}", "labels": s} for i, s in enumerate(selectors)]
    return clusters


NOT_FETCHED = ("helmchart: the chart could not be fetched (the corpus run has no network; "
               "the Application passed every check before the fetch)")


def reason(line: str) -> str:
    """The error line as a group: no file, no indices, no quoted names but a type's."""
    message = line.removeprefix("error: ")
    if ": fetching the chart: " in message:  # helmchart: every check before the fetch passed
        return NOT_FETCHED
    message = re.sub(r"^\S+\.ya?ml: ", "", message)
    message = re.sub(r"\[\d+\]", "[]", message)
    message = re.sub(r"Policy \S+/\S+", "Policy NS/NAME", message)
    message = re.sub(r"policy \S+ (properties|deploys|places|cannot)", r"policy P \1", message)
    if "is not a built-in" not in message:
        message = re.sub(r"'[^']*'", "'…'", message)
    else:  # what is built in, or why vela-core's definition is refused
        message = re.sub(r"( is not a built-in \w+) \(.*$", r"\1", message)
    return re.sub(r"\s*\([^()]*\)$", "", message)  # the list of what would be accepted


_UNKNOWN = re.compile(r"^(\S+): '([^']*)' is not a built-in (type|trait|policy|step)$")


_REFUSED_DEFINITION = re.compile(r"^\S+: '…': (\w+) [\w-]+/(\S+): (.*)$")


def markdown(refusals: collections.Counter[str]) -> str:
    """A table: one row per kind of missing built-in (its names with counts), one per
    reason a definition is refused (the definitions with counts), then every other reason
    as it is."""
    missing: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    rows: list[tuple[int, str]] = []
    for group, count in refusals.items():
        match = _UNKNOWN.match(group)
        refused = _REFUSED_DEFINITION.match(group)
        if match:
            missing[match[3]][match[2]] += count
        elif refused:
            missing[f"{refused[1]} refused, `{refused[3]}`:"][refused[2]] += count
        else:
            rows.append((count, f"`{group}`"))
    for kind, names in missing.items():
        listed = ", ".join(f"`{n}` {c}" for n, c in names.most_common())
        what = kind if kind.endswith(":") else f"{kind} not built in:"
        rows.append((sum(names.values()), f"{what} {listed}"))
    lines = ["| Applications | first refusal |", "|---:|---|"]
    lines += [f"| {count} | {text} |" for count, text in sorted(rows, key=lambda r: -r[0])]
    return "\n".join(lines)


def run(where: str, docs: list[Any], clusters: Path, workdir: Path) -> str | None:
    """None when dry-run accepts, else its error line."""
    path = workdir / "app.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--clusters",
                                      str(clusters), "--local-cluster", "local",
                                      "--target-namespaces", "*"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"error: TRACEBACK {type(result.exception).__name__}: {result.exception}"
    if result.exit_code == 0:
        return None
    lines = result.stderr.splitlines()
    return lines[-1] if lines else f"error: exit {result.exit_code}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirrors", nargs="+", type=Path)
    parser.add_argument("--show", type=int, default=0, help="print N refused, with where")
    parser.add_argument("--json", action="store_true", help="the counts as JSON")
    parser.add_argument("--markdown", action="store_true",
                        help="the refusals as docs/applications.md lists them")
    parser.add_argument("--core-only", action="store_true",
                        help="list the refusals of the core-only Applications only")
    parser.add_argument("--no-addons", action="store_true",
                        help="do not enable the catalog's addons (the measure before them)")
    args = parser.parse_args(argv)
    seen: set[str] = set()
    skipped: collections.Counter[str] = collections.Counter()
    apps: list[tuple[str, JSON, list[JSON]]] = []
    beside: dict[str, list[JSON]] = {}
    for where, text, docs in candidates(args.mirrors, beside):
        found = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Application"
                 and d.get("apiVersion") == "core.oam.dev/v1beta1"]
        if not docs:
            skipped["malformed YAML"] += 1
        for app in found:
            key = json.dumps(app.get("spec"), sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            problem = upstream_problem(app, text) or _template_file(where)
            if problem:
                skipped[problem] += 1
                continue
            external = [d for d in docs if isinstance(d, dict)
                        and d.get("kind") in ("Policy", "Workflow")]
            apps.append((where, app, external))
    # the definitions beside each (read to the end first: a later file may hold them)
    apps = [(where, app, [*external, *beside.get(directory(where), []),
                          *beside.get(f"{directory(where)}/definitions", [])])
            for where, app, external in apps]
    enabled = Addons() if args.no_addons else addons(args.mirrors)
    core = core_types(args.mirrors)
    runnable = []
    for where, app, given in apps:
        problem = enabled.upstream_problem(app, known_types(given, core))
        if problem:
            skipped[problem] += 1
        else:
            runnable.append((where, app, given))
    return report(runnable, skipped, core, enabled, args)


def known_types(given: list[JSON], core: set[str]) -> set[str]:
    """vela-core's types and those defined beside the Application: no addon's."""
    return core | {str((d.get("metadata") or {}).get("name")) for d in given
                   if d.get("kind") in DEFINITION_KINDS}


def with_addons(app: JSON, given: list[JSON], core: set[str], enabled: Addons
                ) -> tuple[list[JSON], list[str], str | None]:
    """The documents dry-run gets (the Application's own, then the definitions of every
    addon it needs), those addons, and why not when a definition it needs does not
    convert. A type defined beside the Application is its own, not an addon's."""
    known = known_types(given, core)
    needed = enabled.needed(app, known)
    docs = [*given, *(doc for addon in needed for doc in enabled.docs[addon])]
    return docs, needed, enabled.unconvertible(app, known)


def report(apps: list[tuple[str, JSON, list[JSON]]], skipped: collections.Counter[str],
           core: set[str], enabled: Addons, args: argparse.Namespace) -> int:
    refusals: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    accepted = 0
    core_total = core_accepted = 0
    by_addon: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        clusters = workdir / "clusters.yaml"
        clusters.write_text(yaml.safe_dump({"clusters": fleet([(a, e) for _, a, e in apps])}))
        for where, app, external in apps:
            docs, needed, problem = with_addons(app, external, core, enabled)
            line = f"error: {problem}" if problem else run(where, [app, *docs], clusters,
                                                            workdir)
            only_core = bool(core) and types_of(app) <= core
            core_total += only_core
            for addon in needed:
                by_addon[addon][0] += 1
                by_addon[addon][1] += line is None
            if line is None:
                accepted += 1
                core_accepted += only_core
                continue
            if args.core_only and not only_core:
                continue
            group = reason(line)
            refusals[group] += 1
            examples.setdefault(group, where)
    total = len(apps)
    if args.json:
        print(json.dumps({"valid_upstream": total, "accepted": accepted,
                          "core_only": core_total, "core_only_accepted": core_accepted,
                          "addons": {a: {"needed_by": n, "accepted": k}
                                     for a, (n, k) in sorted(by_addon.items())},
                          "skipped": dict(skipped), "refusals": dict(refusals)}, indent=1))
        return 0
    if args.markdown:
        print(markdown(refusals))
        return 0
    print(f"Applications KubeVela accepts: {total} (skipped: {sum(skipped.values())}: "
          f"{dict(skipped.most_common())})")
    print(f"accepted by fedctl app dry-run: {accepted} ({100 * accepted / max(total, 1):.1f}%)")
    if core:
        print(f"of the {core_total} using only vela-core's built-in definitions: "
              f"{core_accepted} ({100 * core_accepted / max(core_total, 1):.1f}%)")
    for addon, (users, ok) in sorted(by_addon.items(), key=lambda i: -i[1][0]):
        print(f"needing addon {addon}: {users}, accepted {ok}")
    print("refused, by reason:")
    for group, count in refusals.most_common():
        shown = f"   e.g. {examples[group]}" if args.show else ""
        print(f"{count:5d}  {group}{shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
