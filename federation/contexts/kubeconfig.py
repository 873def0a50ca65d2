"""Kubeconfig files, read the way kubectl reads them.

A :class:`KubeConfig` is the merged view of one or more files; a
:class:`Context` is the small immutable value a client needs to reach one
cluster: server, CA, and credentials. Certificate and key material is held
as bytes (``*-data`` fields, or files read eagerly relative to the kubeconfig
that named them), so a context keeps working when the process changes
directory. Secrets are excluded from ``repr`` so they never reach a log line.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


class KubeconfigError(Exception):
    """A kubeconfig or one of its contexts cannot be used; the message names which."""


@dataclasses.dataclass(frozen=True)
class Context:
    """Everything needed to reach one cluster as one user."""

    name: str
    server: str
    cluster_name: str = ""
    user_name: str = ""
    namespace: str = "default"
    ca_data: bytes | None = dataclasses.field(default=None, repr=False)
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    client_cert_data: bytes | None = dataclasses.field(default=None, repr=False)
    client_key_data: bytes | None = dataclasses.field(default=None, repr=False)
    token: str | None = dataclasses.field(default=None, repr=False)
    token_file: Path | None = None
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
    exec_config: Mapping[str, Any] | None = dataclasses.field(default=None, repr=False)


@dataclasses.dataclass(frozen=True)
class KubeConfig:
    """The merged content of kubeconfig files (first file to set a name wins)."""

    clusters: Mapping[str, Mapping[str, Any]]
    users: Mapping[str, Mapping[str, Any]]
    contexts: Mapping[str, Mapping[str, Any]]
    current_context: str | None
    #: where each named cluster/user came from, to resolve relative file paths
    origins: Mapping[str, Path] = dataclasses.field(default_factory=dict)
    sources: tuple[Path, ...] = ()

    @property
    def context_names(self) -> list[str]:
        return list(self.contexts)

    def view(self) -> dict[str, Any]:
        """The merged config shaped like ``kubectl config view --merge --raw -o json``."""

        def named(kind: str, entries: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
            return [{"name": name, kind: dict(entries[name])} for name in sorted(entries)]

        return {"clusters": named("cluster", self.clusters), "users": named("user", self.users),
                "contexts": named("context", self.contexts),
                "current-context": self.current_context or ""}

    def context(self, name: str | None = None) -> Context:
        """Resolve a context into a :class:`Context`, or raise naming what is missing."""
        name = name or self.current_context
        if not name:
            raise KubeconfigError("no context given and the kubeconfig has no current-context")
        if name not in self.contexts:
            where = ", ".join(str(s) for s in self.sources) or "the kubeconfig"
            raise KubeconfigError(f"context {name!r} not found in {where}")
        entry = self.contexts[name]
        cluster_name = str(entry.get("cluster") or "")
        user_name = str(entry.get("user") or "")
        if cluster_name not in self.clusters:
            raise KubeconfigError(f"context {name!r} refers to unknown cluster {cluster_name!r}")
        cluster = self.clusters[cluster_name]
        user = self.users.get(user_name, {}) if user_name else {}
        if user_name and user_name not in self.users:
            raise KubeconfigError(f"context {name!r} refers to unknown user {user_name!r}")
        server = str(cluster.get("server") or "")
        if not server:
            raise KubeconfigError(f"context {name!r}: cluster {cluster_name!r} has no server")
        cluster_base = self.origins.get(f"cluster/{cluster_name}")
        user_base = self.origins.get(f"user/{user_name}")
        try:
            return Context(
                name=name, server=server.rstrip("/"), cluster_name=cluster_name,
                user_name=user_name, namespace=str(entry.get("namespace") or "default"),
                ca_data=_material(cluster, "certificate-authority", cluster_base),
                insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
                tls_server_name=cluster.get("tls-server-name"),
                client_cert_data=_material(user, "client-certificate", user_base),
                client_key_data=_material(user, "client-key", user_base),
                token=user.get("token"),
                token_file=_path(user.get("tokenFile"), user_base),
                username=user.get("username"), password=user.get("password"),
                exec_config=user.get("exec"),
            )
        except OSError as exc:
            raise KubeconfigError(f"context {name!r}: cannot read {exc.filename}: "
                                  f"{exc.strerror}") from None
        except ValueError as exc:
            raise KubeconfigError(f"context {name!r}: {exc}") from None


def _path(value: Any, base: Path | None) -> Path | None:
    # As kubectl: a relative path is relative to the file that named it; "~" is not expanded.
    if not value:
        return None
    path = Path(str(value))
    if not path.is_absolute() and base is not None:
        path = base.parent / path
    return path


def _material(section: Mapping[str, Any], key: str, base: Path | None) -> bytes | None:
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except ValueError:
            raise ValueError(f"{key}-data is not valid base64") from None
    path = _path(section.get(key), base)
    return path.read_bytes() if path else None


def default_paths(explicit: str | Path | None = None,
                  env: Mapping[str, str] | None = None) -> list[Path]:
    """The files kubectl would read: --kubeconfig alone, else $KUBECONFIG, else ~/.kube/config."""
    if explicit:
        return [Path(explicit)]
    env = os.environ if env is None else env
    if env.get("KUBECONFIG"):
        seen: list[Path] = []
        for part in env["KUBECONFIG"].split(os.pathsep):
            if part and Path(part) not in seen:
                seen.append(Path(part))
        return seen
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return [home / ".kube" / "config"]


def load(explicit: str | Path | None = None, env: Mapping[str, str] | None = None) -> KubeConfig:
    """Load and merge kubeconfigs with kubectl's precedence rules."""
    paths = default_paths(explicit, env)
    # --kubeconfig must exist; files in $KUBECONFIG that do not exist are skipped (as kubectl).
    must_exist = explicit is not None
    documents: list[tuple[Path, dict[str, Any]]] = []
    for path in paths:
        if not path.exists():
            if must_exist:
                raise KubeconfigError(f"kubeconfig {path} does not exist")
            continue
        documents.append((path, read_document(path)))
    return merge(documents)


def read_document(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML{yaml_problem(exc)}"
                              ) from None
    if not isinstance(document, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a mapping")
    return document


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what, in one line: never PyYAML's own message, which quotes the
    offending line of the file (in a kubeconfig, perhaps a token)."""
    mark = getattr(exc, "problem_mark", None)
    problem = str(getattr(exc, "problem", "") or "").splitlines()
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{where}: {problem[0][:80]}" if problem else where


def _entries(path: Path, document: Mapping[str, Any], kind: str) -> dict[str, Mapping[str, Any]]:
    """One file's named entries of a kind; a name twice in one file is an error, as in kubectl."""
    entries: dict[str, Mapping[str, Any]] = {}
    for item in document.get(f"{kind}s") or []:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise KubeconfigError(f"kubeconfig {path}: a {kind} entry has no name")
        if name in entries:
            raise KubeconfigError(f"kubeconfig {path}: duplicate {kind} name {name!r}")
        entries[name] = item.get(kind) or {}
    return entries


def merge(documents: Sequence[tuple[Path, Mapping[str, Any]]]) -> KubeConfig:
    """Merge documents in order: the first to define a name (or current-context) wins."""
    sections: dict[str, dict[str, Mapping[str, Any]]] = {"cluster": {}, "user": {}, "context": {}}
    origins: dict[str, Path] = {}
    current: str | None = None
    for path, document in documents:
        if not current and document.get("current-context"):
            current = str(document["current-context"])
        for kind, merged in sections.items():
            for name, entry in _entries(path, document, kind).items():
                if name not in merged:
                    merged[name] = entry
                    origins[f"{kind}/{name}"] = path
    return KubeConfig(clusters=sections["cluster"], users=sections["user"],
                      contexts=sections["context"], current_context=current, origins=origins,
                      sources=tuple(path for path, _ in documents))
