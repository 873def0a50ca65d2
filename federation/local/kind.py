"""The same fleet on kind clusters, for machines with a Docker engine.

Not exercised in CI: this project's CI machines have no Docker engine. The
commands are built by pure functions (tested as such) and run only when
``kind`` and a reachable Docker engine are both present. kind names contexts
``kind-NAME``; we rename them to ``NAME`` so the fleet's contexts are ``hub``
and ``member1..N`` whichever provider made them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from federation.local import fleet

Progress = Callable[[str], None]


class KindError(Exception):
    """kind cannot be used here; the message says why."""


def cluster_names(members: int) -> list[str]:
    return ["hub", *(f"member{i}" for i in range(1, members + 1))]


def create_commands(members: int, kubeconfig: Path) -> list[list[str]]:
    return [["kind", "create", "cluster", "--name", name, "--kubeconfig", str(kubeconfig),
             "--wait", "120s"] for name in cluster_names(members)]


def delete_commands(members: int) -> list[list[str]]:
    return [["kind", "delete", "cluster", "--name", name] for name in cluster_names(members)]


def label_commands(members: int, kubeconfig: Path) -> list[list[str]]:
    """Label each member's nodes with the region, zone and provider of the local fleet."""
    commands = []
    for index in range(1, members + 1):
        spec = fleet.member_spec(index, (0, 0, 0))
        labels = [f"{key}={value}" for key, value in spec.labels.items()]
        commands.append(["kubectl", "--kubeconfig", str(kubeconfig), "--context", spec.name,
                         "label", "nodes", "--all", "--overwrite", *labels])
    return commands


def rename_contexts(document: dict[str, Any]) -> dict[str, Any]:
    """Rename ``kind-X`` contexts to ``X`` (and the current context with them)."""
    for entry in document.get("contexts") or []:
        name = entry.get("name", "")
        if name.startswith("kind-"):
            entry["name"] = name.removeprefix("kind-")
    current = document.get("current-context", "")
    if current.startswith("kind-"):
        document["current-context"] = current.removeprefix("kind-")
    return document


def check_available() -> None:
    if shutil.which("kind") is None:
        raise KindError("--provider kind needs the `kind` binary on PATH")
    if shutil.which("docker") is None:
        raise KindError("--provider kind needs Docker; no `docker` on PATH")
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise KindError("--provider kind needs a running Docker engine; `docker info` failed "
                        "(this machine has none: use the default provider)")


def up(members: int, kubeconfig: Path, progress: Progress) -> None:
    check_available()
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    for command in create_commands(members, kubeconfig) + label_commands(members, kubeconfig):
        progress(" ".join(command))
        _run(command)
    document = yaml.safe_load(kubeconfig.read_text())
    document = rename_contexts(document)
    document["current-context"] = "hub"
    kubeconfig.write_text(yaml.safe_dump(document, sort_keys=False))


def down(members: int, progress: Progress) -> None:
    check_available()
    for command in delete_commands(members):
        progress(" ".join(command))
        _run(command)


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise KindError(f"{' '.join(command[:4])} failed: {result.stderr.strip()[-300:]}")
