"""How many of the PropagationPolicies in Karmada's own docs load unchanged here.

Run: ``python bench/karmada_policy_corpus.py KARMADA_MIRROR [WEBSITE_MIRROR] [--show]``,
where each MIRROR is a bare git directory (the ``fetch`` tool's
``/work/.mirror/karmada-io+karmada/repo`` and ``.../karmada-io+website/repo``; ``git clone
--mirror`` makes the same). Nothing upstream is kept in this repository.

What it reads (``git ls-tree``/``git show`` of HEAD): in karmada-io/karmada ``docs/`` (the
proposals are there), ``samples/`` and ``examples/``; in karmada-io/website ``docs/`` (the
English pages of the current version; the translations and older versions repeat them).
Every YAML file and every fenced code block of a Markdown page is read with the project's
one capped loader (:mod:`federation.untrusted.documents`); a block that is not YAML (a
shell session, a fragment with ``...``) is skipped. Each document whose ``apiVersion`` is
``policy.karmada.io/v1alpha1`` and ``kind`` PropagationPolicy or ClusterPropagationPolicy,
with a ``spec``, is one case; equal documents count once. Each is loaded as the hub loads
it (:func:`federation.placement.loader.parse_policy`): a refusal is printed with its
reason, one line each.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from federation.placement import loader
from federation.untrusted import documents

SOURCES = {"karmada": ("docs", "samples", "examples"), "website": ("docs",)}
KINDS = ("PropagationPolicy", "ClusterPropagationPolicy")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def _git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", mirror, *args], check=True,
                          capture_output=True, text=True, errors="replace").stdout


def files(mirror: str, roots: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(path, text) of each YAML or Markdown file under ``roots`` at HEAD."""
    listing = _git(mirror, "ls-tree", "-r", "--name-only", "HEAD", *roots).splitlines()
    for path in listing:
        if path.endswith((".yaml", ".yml", ".md", ".mdx")):
            yield path, _git(mirror, "show", f"HEAD:{path}")


def blocks(path: str, text: str) -> Iterator[str]:
    if path.endswith((".yaml", ".yml")):
        yield text
        return
    for found in FENCE.finditer(text):
        if "kind:" in found.group(1):
            yield found.group(1)


def policies(mirror: str, roots: tuple[str, ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, text in files(mirror, roots):
        for block in blocks(path, text):
            try:
                docs = documents.yaml_documents(block)
            except documents.TextError:
                continue
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind") in KINDS and \
                        doc.get("apiVersion") == "policy.karmada.io/v1alpha1" and \
                        isinstance(doc.get("spec"), dict):
                    yield path, doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("karmada")
    parser.add_argument("website", nargs="?")
    parser.add_argument("--show", action="store_true", help="list every refusal")
    args = parser.parse_args()
    seen: dict[str, str] = {}
    for name, mirror in (("karmada", args.karmada), ("website", args.website)):
        if mirror:
            for path, doc in policies(mirror, SOURCES[name]):
                seen.setdefault(json.dumps(doc, sort_keys=True, default=str), f"{name}:{path}")
    refused: list[tuple[str, str]] = []
    for text, where in seen.items():
        try:
            loader.parse_policy(json.loads(text), where)
        except loader.LoadError as exc:
            refused.append((where, f"{exc.path}: {exc.message}"))
    loaded = len(seen) - len(refused)
    print(f"{loaded} of {len(seen)} Karmada policy documents load unchanged")
    reasons = collections.Counter(reason.split(":")[0] for _, reason in refused)
    for field, count in reasons.most_common():
        print(f"  {count:3d} refused at {field}")
    if args.show:
        for where, reason in sorted(refused):
            print(f"{where}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
