"""The fleet's contexts in the user's own kubeconfig, as kind and minikube put theirs.

``fedctl local up --export-kubeconfig`` (``make run`` passes it) copies the clusters,
users and contexts of the fleet's admin kubeconfig into the file kubectl would write
(the first path of ``$KUBECONFIG``, else ``~/.kube/config``) and makes ``hub`` the
current context, so ``fedctl get clusters`` and ``kubectl get ns`` work with no flags.
What was written, and the current context before, are recorded in the state
directory; ``fedctl local down`` takes exactly those entries out again and gives the
old current context back if ``hub`` is still current.

Nothing of the user's is overwritten: an entry of the same name that the fleet did not
write (a real cluster called ``hub``) stops the export with a one-line reason and the
file is left as it was; the fleet itself is up either way. The file is replaced
atomically and stays private (0600), as kubectl keeps it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

SECTIONS = ("clusters", "users", "contexts")
RECORD = "user-kubeconfig.json"
CURRENT = "hub"
JSON = dict[str, Any]


class ExportError(Exception):
    """The user's kubeconfig cannot take the fleet's entries (one line)."""


def target(env: Mapping[str, str] | None = None) -> Path:
    """Where kubectl writes: the first file of $KUBECONFIG, else ~/.kube/config."""
    env = os.environ if env is None else env
    first = next((p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p), None)
    return Path(first).expanduser() if first else Path.home() / ".kube" / "config"


def export(fleet_kubeconfig: Path, state_dir: Path, path: Path) -> list[str]:
    """Merge the fleet's entries into ``path``; the contexts written."""
    ours = _read(fleet_kubeconfig)
    theirs: JSON = _read(path) if path.exists() else {"apiVersion": "v1", "kind": "Config",
                                                       "preferences": {}}
    record = _record(state_dir)
    written = record.get("names", {}) if record.get("path") == str(path) else {}
    for section in SECTIONS:
        taken = {e["name"] for e in ours.get(section) or []}
        for entry in theirs.get(section) or []:
            if entry.get("name") in taken and entry.get("name") not in written.get(section, []):
                raise ExportError(f"{path} already has a {section[:-1]} named "
                                  f"{entry['name']!r} that the local fleet did not write: "
                                  f"left as it was (use --kubeconfig {fleet_kubeconfig})")
    previous = record.get("previous") if written else theirs.get("current-context")
    for section in SECTIONS:
        mine = {e["name"]: e for e in ours.get(section) or []}
        kept = [e for e in theirs.get(section) or [] if e.get("name") not in mine]
        theirs[section] = [*kept, *mine.values()]
    theirs["current-context"] = CURRENT
    _write(path, theirs)
    names = {s: [e["name"] for e in ours.get(s) or []] for s in SECTIONS}
    _write_record(state_dir, {"path": str(path), "names": names, "previous": previous})
    return names["contexts"]


def remove(state_dir: Path) -> Path | None:
    """Take the recorded entries out of the user's kubeconfig; the file, if any."""
    record = _record(state_dir)
    if not record.get("path"):
        return None
    path = Path(record["path"])
    if path.exists():
        document = _read(path)
        for section in SECTIONS:
            gone = set(record["names"].get(section, []))
            document[section] = [e for e in document.get(section) or []
                                 if e.get("name") not in gone]
        if document.get("current-context") == CURRENT:
            document["current-context"] = record.get("previous") or ""
        _write(path, document)
    (state_dir / RECORD).unlink(missing_ok=True)
    return path


def _read(path: Path) -> JSON:
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ExportError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(document, dict):
        raise ExportError(f"{path} is not a kubeconfig (not a mapping)")
    for section in SECTIONS:
        entries = document.get(section) or []
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries):
            raise ExportError(f"{path}: {section} is not a list of named entries")
    return document


def _write(path: Path, document: JSON) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".fedctl-tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(yaml.safe_dump(document, sort_keys=False))
    temporary.replace(path)


def _record(state_dir: Path) -> JSON:
    try:
        found = json.loads((state_dir / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_record(state_dir: Path, record: JSON) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / RECORD).write_text(json.dumps(record, indent=1))
