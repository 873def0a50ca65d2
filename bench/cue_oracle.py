"""Fidelity of ``federation.cue`` against the real CUE, on KubeVela's own definitions.

Run: ``python bench/cue_oracle.py MIRROR [CORPUS_MIRROR...] [--addons CATALOG] [--cache DIR]
[--per-type N]``,
where MIRROR is a bare git directory of kubevela/kubevela (the ``fetch`` tool's
``/work/.mirror/kubevela+kubevela/repo``) and the optional CORPUS_MIRRORs are where real
Applications are read from (as ``bench/vela_corpus.py`` reads them; kubevela itself,
``kubevela+kubevela.io``, ``kubevela+catalog``).

The oracle is the npm package ``cue-wasm`` (CUE v0.4.3 compiled to WebAssembly), installed
with ``npm install --prefix CACHE`` on first use and run under Node as one long-lived
process. It is a measuring instrument only: nothing here is a runtime dependency.

For every component, trait and policy definition of ``vela-templates/definitions/internal``
the template is taken as KubeVela stores it (the imports and the body of ``template:``), and
evaluated with each parameter sample: a minimal one derived by hand (``MINIMAL``) and the
``properties`` of every Application of the corpus that uses the type (deduplicated, at most
``--per-type``). Both sides evaluate the same ``parameter`` and ``context`` and export the
same top-level fields (``output``, ``outputs``, ``patch``, ``patchOutputs``; a policy's
``parameter``). They agree when both export equal JSON or both refuse. Every disagreement
is printed on one line.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from federation import cue

DEFINITIONS = "vela-templates/definitions/internal"
KINDS = ("component", "trait", "policy")
FIELDS = ("output", "outputs", "patch", "patchOutputs")
ORACLE_JS = """
import { init } from "cue-wasm";
import readline from "readline";
const cue = await init();
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const req = JSON.parse(line);
  let out;
  try { out = { id: req.id, value: JSON.parse(cue.toJSON(req.text)) }; }
  catch (e) { out = { id: req.id, error: String(e) }; }
  process.stdout.write(JSON.stringify(out) + "\\n");
}
"""
CONTEXT: dict[str, Any] = {
    "name": "demo", "appName": "app", "namespace": "default", "appRevision": "app-v1",
    "appRevisionNum": 1, "revision": "demo-v1", "cluster": "local", "components": [],
    "clusterVersion": {"major": "1", "minor": 28, "gitVersion": "v1.28.0",
                       "platform": "linux/amd64"},
}
TRAIT_OUTPUT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo"},
    "spec": {"selector": {"matchLabels": {"app.oam.dev/component": "demo"}},
             "template": {"metadata": {"labels": {"app.oam.dev/component": "demo"}},
                          "spec": {"containers": [{"name": "demo", "image": "nginx"}]}}},
}
# The least each definition needs (its required parameters), written from its schema.
MINIMAL: dict[str, dict[str, Any]] = {
    "webservice": {"image": "nginx"}, "worker": {"image": "busybox"},
    "daemon": {"image": "fluentd"}, "task": {"image": "perl"},
    "cron-task": {"image": "busybox", "schedule": "*/1 * * * *"},
    "statefulset": {"image": "redis"},
    "k8s-objects": {"objects": [{"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "c"}, "data": {"k": "v"}}]},
    "ref-objects": {"objects": [{"resource": "configmap", "name": "c"}]},
    "container-image": {"image": "nginx:2"},
    "command": {"command": ["sleep", "10"]},
    "env": {"env": {"A": "1"}},
    "init-container": {"name": "init", "image": "busybox", "mountName": "data",
                       "appMountPath": "/data", "initMountPath": "/init"},
    "sidecar": {"name": "log", "image": "busybox"},
    "service-account": {"name": "sa"},
    "pure-ingress": {"domain": "example.com", "http": {"/": 80}},
    "gateway": {"domain": "example.com", "http": {"/": 80}},
    "expose": {"port": [80]},
    "hostalias": {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a.local"]}]},
    "labels": {"team": "a"}, "annotations": {"team": "a"},
    "scaler": {"replicas": 2}, "cpuscaler": {"min": 1, "max": 3},
    "hpa": {"max": 5}, "storage": {"emptyDir": [{"name": "tmp", "mountPath": "/tmp"}]},
    "topologyspreadconstraints": {"constraints": [{"topologyKey": "zone",
                                                   "labelSelector": {}}]},
    "json-patch": {"operations": [{"op": "add", "path": "/spec/replicas", "value": 2}]},
    "json-merge-patch": {"spec": {"replicas": 2}},
    "startup-probe": {"exec": {"command": ["true"]}},
    "container-ports": {"ports": [{"containerPort": 8080}]},
    "affinity": {"podAffinity": {"required": [{"topologyKey": "zone"}]}},
    "override": {"components": [{"name": "demo", "properties": {"image": "x"}}]},
    "topology": {"clusters": ["local"]},
    "garbage-collect": {"keepLegacyResource": True},
    "read-only": {"rules": [{"selector": {"resourceTypes": ["Deployment"]}}]},
    "take-over": {"rules": [{"selector": {"resourceTypes": ["Deployment"]}}]},
    "replication": {"keys": ["a"]},
}


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(mirror), *args], check=True,
                          capture_output=True, text=True).stdout


def definitions(mirror: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, name, template) of vela-core's internal component/trait/policy definitions."""
    for path in git(mirror, "ls-tree", "-r", "--name-only", "HEAD", DEFINITIONS).split():
        kind = path.split("/")[-2]
        if kind in KINDS and path.endswith(".cue"):
            text = git(mirror, "show", f"HEAD:{path}")
            name = re.search(r'^"?([\w.-]+)"?:\s*\{', text, re.M)
            yield kind, name.group(1) if name else path, template_of(text)


def addon_definitions(catalog: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, name, template) of the addon catalog's component/trait/policy definitions."""
    for path in git(catalog, "ls-tree", "-r", "--name-only", "HEAD", "addons").split():
        if not re.fullmatch(r"addons/[^/]+/definitions/[^/]+\.cue", path):
            continue
        text = git(catalog, "show", f"HEAD:{path}")
        head = text.split("\ntemplate:", 1)[0]
        kind = re.search(r'^\s*type:\s*"(\w+)"', head, re.M)
        name = re.search(r'^"?([\w.-]+)"?:\s*\{', text, re.M)
        if kind and kind.group(1) in KINDS and name:
            try:
                yield kind.group(1), name.group(1), template_of(text)
            except ValueError:
                continue


def template_of(text: str) -> str:
    """The CUE KubeVela stores for a definition: its imports and the body of ``template``
    (found with our lexer, so braces in strings and comments do not count)."""
    from federation.cue.lexer import tokenize

    tokens = tokenize(text, "definition")
    lines = [0]
    for line in text.splitlines(keepends=True):
        lines.append(lines[-1] + len(line))
    offset = {id(t): lines[t.line - 1] + t.col - 1 for t in tokens}
    depth, start, head = 0, -1, -1
    for k, token in enumerate(tokens):
        if token.kind == "op" and token.value in "{[(":
            depth += 1
            if depth == 1 and start < 0 and k >= 2 and tokens[k - 2].value == "template":
                start = offset[id(token)] + 1
        elif token.kind == "op" and token.value in "}])":
            depth -= 1
            if depth == 0 and start >= 0:
                return text[:head] + "\n" + text[start:offset[id(token)]] + "\n"
        elif depth == 0 and head < 0 and token.kind in ("ident", "string") and \
                tokens[k + 1].value == ":":
            head = offset[id(token)]
    raise ValueError("no template block")


def corpus_properties(mirrors: Sequence[Path]) -> dict[str, list[dict[str, Any]]]:
    """The ``properties`` each type is used with in the corpus' Applications."""
    if not mirrors:
        return {}
    import vela_corpus

    found: dict[str, list[dict[str, Any]]] = {}
    for _, _, docs in vela_corpus.candidates(mirrors):
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") == "Application":
                for kind, item in used_types(doc):
                    props = item.get("properties")
                    if isinstance(props, dict):
                        found.setdefault(f"{kind}/{item.get('type')}", []).append(props)
    return found


def used_types(app: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = app.get("spec") or {}
    for component in spec.get("components") or []:
        if isinstance(component, dict):
            yield "component", component
            yield from (("trait", t) for t in component.get("traits") or []
                        if isinstance(t, dict))
    yield from (("policy", p) for p in spec.get("policies") or [] if isinstance(p, dict))


class Oracle:
    def __init__(self, cache: Path) -> None:
        cache.mkdir(parents=True, exist_ok=True)
        if not (cache / "node_modules" / "cue-wasm").is_dir():
            subprocess.run(["npm", "install", "--prefix", str(cache), "cue-wasm@1.0.0"],
                           check=True, capture_output=True)
        script = cache / "oracle.mjs"
        script.write_text(ORACLE_JS)
        self.proc = subprocess.Popen(["node", str(script)], cwd=cache, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.count = 0

    def export(self, text: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.count += 1
        self.proc.stdin.write(json.dumps({"id": self.count, "text": text}) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def oracle_text(template: str, fill: dict[str, Any], fields: Sequence[str]) -> str:
    """One CUE file: the template and the fill (in one struct, as KubeVela joins them) under
    a hidden field, and the fields to export."""
    imports = re.match(r"\s*(import\s*(\([^)]*\)|\"[^\"]*\")\s*)*", template)
    assert imports is not None
    head, body = template[: imports.end()], template[imports.end():]
    lines = [head, "_t: {", body]
    lines += [f"{key}: {json.dumps(value)}" for key, value in fill.items()]
    lines += ["}"] + [f"{field}: _t.{field}" for field in fields]
    return "\n".join(lines)


PARSED: dict[str, cue.Template | cue.CueError] = {}


def ours(template: str, name: str, fill: dict[str, Any],
         fields: Sequence[str]) -> tuple[dict[str, Any] | None, str | None, float]:
    """Our export (the template parsed once, as a definition would be cached), and its time."""
    if template not in PARSED:
        try:
            PARSED[template] = cue.parse(template, name=name)
        except cue.CueError as err:
            PARSED[template] = err
    parsed = PARSED[template]
    if isinstance(parsed, cue.CueError):
        return None, str(parsed), 0.0
    started = time.perf_counter()
    try:
        values = cue.export(parsed, fill, fields).values
        return values, None, time.perf_counter() - started
    except cue.CueError as err:
        return None, str(err), time.perf_counter() - started


def top_fields(template: str, kind: str) -> list[str]:
    present = [f for f in FIELDS if re.search(rf"^\t?{f}:", template, re.M)]
    return present if kind != "policy" else [*present, "parameter"]


def first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: only in {'CUE' if key in b else 'ours'}"
            if a[key] != b[key]:
                return first_difference(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    if isinstance(a, str) and isinstance(b, str):
        pairs = enumerate(zip(a, b, strict=False))
        at = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
        a, b = a[max(0, at - 20):at + 40], b[max(0, at - 20):at + 40]
    return f"{path}: ours {json.dumps(a)[:80]} / CUE {json.dumps(b)[:80]}"


def compare(oracle: Oracle, kind: str, name: str, template: str, label: str,
            params: dict[str, Any]) -> tuple[bool | None, str, float]:
    context = dict(CONTEXT, output=TRAIT_OUTPUT) if kind == "trait" else CONTEXT
    fill = {"parameter": params, "context": context}
    fields = top_fields(template, kind)
    mine, my_error, elapsed = ours(template, name, fill, fields)
    if re.search(r'^\s*"vela/', template, re.M) or 'import "vela/' in template:
        return None, f"{kind}/{name} [{label}]: skipped (imports a KubeVela provider)", 0.0
    theirs = oracle.export(oracle_text(template, fill, fields))
    if my_error is not None and "error" in theirs:
        return True, f"{kind}/{name} [{label}]: both refuse", elapsed
    if my_error is not None:
        return False, f"{kind}/{name} [{label}]: ours refuses: {my_error}", elapsed
    if "error" in theirs:
        first = str(theirs["error"]).splitlines()[0][:160]
        return False, f"{kind}/{name} [{label}]: CUE refuses: {first}", elapsed
    if mine == theirs["value"]:
        return True, f"{kind}/{name} [{label}]: equal", elapsed
    diff = first_difference(mine, theirs["value"])
    return False, f"{kind}/{name} [{label}]: differ at {diff}", elapsed


def samples(kind: str, name: str, corpus: dict[str, list[dict[str, Any]]],
            per_type: int) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "minimal", MINIMAL.get(name, {})
    seen: set[str] = set()
    for props in corpus.get(f"{kind}/{name}", []):
        key = json.dumps(props, sort_keys=True)
        if key not in seen and len(seen) < per_type:
            seen.add(key)
            yield f"corpus {len(seen)}", props


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("mirror", type=Path)
    parser.add_argument("corpus", type=Path, nargs="*")
    parser.add_argument("--cache", type=Path,
                        default=Path.home() / ".cache" / "federation" / "cue-oracle")
    parser.add_argument("--per-type", type=int, default=8)
    parser.add_argument("--all", action="store_true", help="print agreements too")
    parser.add_argument("--addons", type=Path, help="the addon catalog's mirror: its "
                        "definitions too (kubevela+catalog)")
    args = parser.parse_args(argv)
    corpus = corpus_properties([args.mirror, *args.corpus] if args.corpus else [])
    oracle = Oracle(args.cache)
    agreed = total = 0
    times: list[float] = []
    outcomes: dict[str, int] = {}
    try:
        every = list(definitions(args.mirror))
        if args.addons is not None:
            every += list(addon_definitions(args.addons))
        for kind, name, template in every:
            for label, params in samples(kind, name, corpus, args.per_type):
                ok, line, elapsed = compare(oracle, kind, name, template, label, params)
                outcome = line.rsplit("]: ", 1)[1].split(" at ")[0].split(":")[0]
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                if ok is not None:
                    total += 1
                    agreed += ok
                if elapsed:
                    times.append(elapsed)
                if ok is False or args.all:
                    print(line, flush=True)
    finally:
        oracle.close()
    times.sort()
    print(f"agree: {agreed}/{total} ({', '.join(f'{k}: {v}' for k, v in outcomes.items())}); "
          f"our render median {times[len(times) // 2] * 1000:.1f} ms, "
          f"max {times[-1] * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
