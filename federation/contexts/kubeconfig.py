"""Kubeconfig files, read the way kubectl reads them.

A :class:`KubeConfig` is the merged view of one or more files; a
:class:`Context` is the small immutable value a client needs to reach one
cluster: server, CA, and credentials. Certificate and key material is held
as bytes (``*-data`` fields, or files read eagerly relative to the kubeconfig
that named them), so a context keeps working when the process changes
directory. Secrets are excluded from ``repr`` so they never reach a log line.

A kubeconfig is untrusted text (a file handed to ``--kubeconfig``, a Secret a hub user
may write): it is read through :mod:`federation.untrusted.documents` (at most
:data:`LIMITS` bytes are read, UTF-8 only, depth, value and alias limits checked before
any recursive parser runs, one document), its shape is checked field by field (lists of
named mappings, strings where strings belong), and every failure is a one-line
:class:`KubeconfigError` naming the file (or Secret) and the reason. No error ever quotes
the file's content: it may hold tokens (the loader's ``quote=False``).
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from federation.untrusted import documents as untrusted
from federation.untrusted.text import one_line

LIMITS = untrusted.LIMITS
"""4 MiB, 100 levels, 100,000 values: a kubeconfig of a thousand contexts with inlined
certificates fits; certificate and key files it names are held to the same size."""


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
    disable_compression: bool = False
    """kubectl's ``disable-compression`` (a cluster field since 1.26): ask for answers
    uncompressed. The API server gzips answers over 128 KB for clients that accept it;
    on loopback or a LAN that is CPU spent on both ends for nothing (measured on the
    local fleet: 10,000 bindings listed whole cost the hub 2.3-2.7 s of CPU gzipped against
    1.7-1.9 s plain, and us 0.2 s to inflate)."""
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
        where = f"context {name!r}"
        cluster_name = _text(entry, "cluster", where) or ""
        user_name = _text(entry, "user", where) or ""
        if cluster_name not in self.clusters:
            raise KubeconfigError(f"context {name!r} refers to unknown cluster {cluster_name!r}")
        cluster = self.clusters[cluster_name]
        user = self.users.get(user_name, {}) if user_name else {}
        if user_name and user_name not in self.users:
            raise KubeconfigError(f"context {name!r} refers to unknown user {user_name!r}")
        server = _text(cluster, "server", f"cluster {cluster_name!r}") or ""
        if not server:
            raise KubeconfigError(f"context {name!r}: cluster {cluster_name!r} has no server")
        cluster_base = self.origins.get(f"cluster/{cluster_name}")
        user_base = self.origins.get(f"user/{user_name}")
        try:
            return _context(name, entry, cluster_name, cluster, user_name, user,
                            cluster_base, user_base)
        except OSError as exc:
            raise KubeconfigError(f"context {name!r}: cannot read {exc.filename}: "
                                  f"{exc.strerror}") from None
        except ValueError as exc:
            raise KubeconfigError(f"context {name!r}: {exc}") from None


def _context(name: str, entry: Mapping[str, Any], cluster_name: str,
             cluster: Mapping[str, Any], user_name: str, user: Mapping[str, Any],
             cluster_base: Path | None, user_base: Path | None) -> Context:
    """The :class:`Context`; a field of the wrong type raises ValueError naming it."""
    in_cluster, in_user = f"cluster {cluster_name!r}", f"user {user_name!r}"
    skip = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(skip, bool):
        raise ValueError(f"{in_cluster}: insecure-skip-tls-verify is not true or false")
    _refuse_unsupported(cluster, UNSUPPORTED_CLUSTER_FIELDS, in_cluster)
    _refuse_unsupported(user, UNSUPPORTED_USER_FIELDS, in_user)
    plain = cluster.get("disable-compression", False)
    if not isinstance(plain, bool):
        raise ValueError(f"{in_cluster}: disable-compression is not true or false")
    exec_config = user.get("exec")
    if exec_config is not None and not isinstance(exec_config, Mapping):
        raise ValueError(f"{in_user}: exec is not a mapping")
    return Context(
        name=name, server=str(_text(cluster, "server", in_cluster)).rstrip("/"),
        cluster_name=cluster_name, user_name=user_name,
        namespace=_text(entry, "namespace", f"context {name!r}") or "default",
        ca_data=_material(cluster, "certificate-authority", cluster_base, in_cluster),
        insecure_skip_tls_verify=skip, disable_compression=plain,
        tls_server_name=_text(cluster, "tls-server-name", in_cluster),
        client_cert_data=_material(user, "client-certificate", user_base, in_user),
        client_key_data=_material(user, "client-key", user_base, in_user),
        token=_text(user, "token", in_user),
        token_file=_path(_text(user, "tokenFile", in_user), user_base),
        username=_text(user, "username", in_user),
        password=_text(user, "password", in_user),
        exec_config=exec_config,
    )


UNSUPPORTED_CLUSTER_FIELDS = {
    "proxy-url": "connections go straight to the server",
}
"""kubectl's cluster fields this client does not honour, each with what would happen."""
UNSUPPORTED_USER_FIELDS = {
    "as": "impersonation is not sent: requests would run as the identity itself",
    "as-uid": "impersonation is not sent: requests would run as the identity itself",
    "as-groups": "impersonation is not sent: requests would run as the identity itself",
    "as-user-extra": "impersonation is not sent: requests would run as the identity itself",
    "auth-provider": "legacy auth providers are not run; use an exec plugin or a token",
}
"""kubectl's user fields this client does not honour. Refused rather than ignored: an
ignored ``as`` would make every request run as the (often broader) identity behind it."""


def _refuse_unsupported(section: Mapping[str, Any], unsupported: Mapping[str, str],
                        where: str) -> None:
    for key, consequence in unsupported.items():
        if section.get(key) not in (None, "", [], {}):
            raise ValueError(f"{where}: {key} is not supported ({consequence})")


def _text(section: Mapping[str, Any], key: str, where: str) -> str | None:
    """A string field, None when absent; any other type is an error naming the field
    (never quoting its value: it may be a token)."""
    value = section.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise KubeconfigError(f"{where}: {key} is not a string")
    return value


def _path(value: Any, base: Path | None) -> Path | None:
    # As kubectl: a relative path is relative to the file that named it; "~" is not expanded.
    if not value:
        return None
    path = Path(str(value))
    if not path.is_absolute() and base is not None:
        path = base.parent / path
    return path


def _material(section: Mapping[str, Any], key: str, base: Path | None,
              where: str = "") -> bytes | None:
    data = _text(section, f"{key}-data", where)
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise ValueError(f"{key}-data is not valid base64") from None
    path = _path(_text(section, key, where), base)
    return read_capped(path) if path else None


def read_capped(path: Path) -> bytes:
    """The bytes of ``path``, never more than one byte past :data:`LIMITS` (a huge file,
    or ``/dev/zero``, is not read whole); OSError as :meth:`Path.read_bytes` raises it."""
    with path.open("rb") as file:
        data = file.read(LIMITS.max_bytes + 1)
    if len(data) > LIMITS.max_bytes:
        raise ValueError(f"{path} is larger than the limit of {LIMITS.max_bytes} bytes")
    return data


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
    """One kubeconfig file as data, within :data:`LIMITS` (see the module docstring)."""
    try:
        with path.open("rb") as file:
            data = file.read(LIMITS.max_bytes + 1)
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    return parse(data, f"kubeconfig {path}")


def parse(data: bytes | str, where: str) -> dict[str, Any]:
    """Untrusted kubeconfig text as one mapping; :class:`KubeconfigError` starting with
    ``where`` (the file or Secret) and never quoting the text."""
    try:
        text = untrusted.decode(data.encode() if isinstance(data, str) else data, LIMITS)
        found = untrusted.yaml_documents(text, LIMITS, quote=False)
    except untrusted.TextError as exc:
        raise KubeconfigError(f"{where}: {one_line(str(exc), 300)}") from None
    if len(found) > 1:
        raise KubeconfigError(f"{where} holds {len(found)} YAML documents; a kubeconfig is one")
    document = found[0] if found else {}
    if not isinstance(document, dict):
        raise KubeconfigError(f"{where} is not a mapping")
    return document


def _entries(path: Path, document: Mapping[str, Any], kind: str
             ) -> dict[str, Mapping[str, Any]]:
    """One file's named entries of a kind; a name twice in one file is an error, as in
    kubectl; anything but a list of named mappings is an error naming the field."""
    where = f"kubeconfig {path}"
    items = document.get(f"{kind}s") or []
    if not isinstance(items, list):
        raise KubeconfigError(f"{where}: {kind}s is not a list")
    entries: dict[str, Mapping[str, Any]] = {}
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise KubeconfigError(f"{where}: a {kind} entry has no name")
        if name in entries:
            raise KubeconfigError(f"{where}: duplicate {kind} name {name!r}")
        entry = item.get(kind) or {}
        if not isinstance(entry, dict):
            raise KubeconfigError(f"{where}: {kind} {name!r} is not a mapping")
        entries[name] = entry
    return entries


def merge(documents: Sequence[tuple[Path, Mapping[str, Any]]]) -> KubeConfig:
    """Merge documents in order: the first to define a name (or current-context) wins."""
    sections: dict[str, dict[str, Mapping[str, Any]]] = {"cluster": {}, "user": {}, "context": {}}
    origins: dict[str, Path] = {}
    current: str | None = None
    for path, document in documents:
        if not current and document.get("current-context"):
            if not isinstance(document["current-context"], str):
                raise KubeconfigError(f"kubeconfig {path}: current-context is not a string")
            current = document["current-context"]
        for kind, merged in sections.items():
            for name, entry in _entries(path, document, kind).items():
                if name not in merged:
                    merged[name] = entry
                    origins[f"{kind}/{name}"] = path
    return KubeConfig(clusters=sections["cluster"], users=sections["user"],
                      contexts=sections["context"], current_context=current, origins=origins,
                      sources=tuple(path for path, _ in documents))
