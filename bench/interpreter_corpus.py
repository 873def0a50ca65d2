"""How many of Karmada's third-party customization test cases ``fedctl interpret`` passes.

Run: ``python bench/interpreter_corpus.py MIRROR [--show N]``, where MIRROR is a bare git
directory of karmada-io/karmada (the ``fetch`` tool's ``/work/.mirror/karmada-io+karmada/
repo``; ``git clone --mirror`` makes the same). Nothing upstream is kept in this
repository: the customizations and their test data are Karmada's (Apache-2.0) to publish.

What it reads (``git ls-tree``/``git show`` of HEAD): each
``pkg/resourceinterpreter/default/thirdparty/resourcecustomizations/<group>/<version>/
<Kind>/customizations.yaml`` and every YAML document of the ``testdata/`` folder beside it.
Each customization is parsed as the hub would parse it (unchanged: a refusal is a failure),
and each test document runs as Karmada's ``thirdparty_test.go`` runs it: the operation it
names through the engine of ``fedctl interpret`` (the same sandbox and budget as the
control plane), every result it expects compared as Karmada compares
(:mod:`federation.interpreter.compare`), an expected result missing from ours a failure.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from typing import Any

from federation.interpreter import compare, declarative, lua
from federation.interpreter import customizations as customizations_
from federation.interpreter.engine import execute
from federation.untrusted import documents

ROOT = "pkg/resourceinterpreter/default/thirdparty/resourcecustomizations/"


def _git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", mirror, *args], check=True,
                          capture_output=True, text=True).stdout


def _yaml(mirror: str, path: str) -> list[Any]:
    text = _git(mirror, "show", f"HEAD:{path}")
    return [d for d in documents.yaml_documents(text) if d is not None]


def _case_arguments(case: dict[str, Any]) -> declarative.Arguments:
    return declarative.Arguments(desired=case.get("desiredObj"),
                                 observed=case.get("observedObj"),
                                 status_items=case.get("statusItems"),
                                 replicas=int(case.get("inputReplicas") or 0))


def run_case(found: list[customizations_.Customization], case: dict[str, Any]) -> str | None:
    """Why ``case`` fails, or None when it passes."""
    try:
        operation = customizations_.Operation.named(str(case.get("operation")))
        results = dict(execute(customizations_.Registry(found), operation, _case_arguments(case)))
    except (lua.ScriptError, customizations_.CustomizationError) as exc:
        return f"error: {exc}"
    for name, expected in (case.get("output") or {}).items():
        if name not in results:
            return f"output {name} is not a result of the operation"
        if not compare.equal(name, expected, results[name]):
            return f"{name} differs: got {results[name]!r}"[:400]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirror")
    parser.add_argument("--show", type=int, default=50, help="failures to print")
    options = parser.parse_args()
    files = _git(options.mirror, "ls-tree", "-r", "--name-only", "HEAD", ROOT).split()
    folders = sorted({f.rsplit("/", 1)[0] for f in files if f.endswith("/customizations.yaml")})
    passed, failures, by_operation = 0, [], collections.Counter[str]()
    started = time.perf_counter()
    for folder in folders:
        found = [customizations_.parse(d) for d in _yaml(options.mirror,
                                                          f"{folder}/customizations.yaml")]
        for path in (f for f in files if f.startswith(f"{folder}/testdata/")):
            for case in _yaml(options.mirror, path):
                by_operation[str(case.get("operation"))] += 1
                problem = run_case(found, case)
                if problem is None:
                    passed += 1
                else:
                    failures.append(f"{path.removeprefix(ROOT)}: {case.get('name')}: {problem}")
    total = passed + len(failures)
    elapsed = time.perf_counter() - started
    print(f"{len(folders)} customizations, {total} cases, {passed}/{total} pass "
          f"({elapsed:.1f} s); by operation: {dict(sorted(by_operation.items()))}")
    for line in failures[:options.show]:
        print(f"FAIL {line}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
