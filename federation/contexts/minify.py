"""One context's kubeconfig, minified and checked: what ``fedctl join`` stores in a Secret.

:func:`minify` takes one context out of a (merged) kubeconfig and returns a
self-contained kubeconfig document holding only that context, its cluster
and its user, renamed to the member's name, with every file reference
(certificate authority, client certificate and key, token file) read and
inlined, so it works wherever the control plane runs. Nothing of the other
contexts, clusters or users leaves the file.

Exec credential plugins run a command inside the control plane, with its
environment. A kubeconfig that arrives through the hub (a Secret anyone with
write access there could edit) must not be able to run whatever it likes, so
its exec plugin must pass :func:`federation.contexts.credentials.check_exec`
with the allowlist (the well-known cloud plugins by bare name, held to their
token subcommand; more by exact name or absolute path) and may not set
``PATH`` or any other variable of its deny list. ``fedctl join`` checks this
before writing anything; the control plane checks it again before engaging a
cluster from a Secret, and once more when it builds the cluster's client (where
it resolves the command on its own PATH). Legacy ``auth-provider`` users are
refused (kubectl removed them).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from federation.contexts import credentials, kubeconfig

JSON = dict[str, Any]

EXEC_ALLOWLIST = frozenset(credentials.EXEC_ALLOWLIST)
"""Exec plugin commands allowed by default (see :data:`credentials.EXEC_ALLOWLIST`)."""

SECRET_KEY = "kubeconfig"
"""The key of the kubeconfig in a join Secret."""


class MinifyError(kubeconfig.KubeconfigError):
    """The context cannot be stored for the control plane; the message says why and what to do."""


def check_exec(context: str, user: Mapping[str, Any], allowed: Iterable[str] = ()) -> None:
    """Refuse an exec plugin the control plane may not run, and any auth-provider."""
    if user.get("auth-provider"):
        raise MinifyError(f"context {context!r} uses a legacy auth-provider, which is not "
                          "supported; use an exec plugin or a token")
    if user.get("exec") is None:
        return
    try:
        credentials.check_exec(context, user["exec"], credentials.ExecAllowlist.of(allowed))
    except (credentials.CredentialsError, ValueError) as exc:
        raise MinifyError(str(exc)) from None


def minify(config: kubeconfig.KubeConfig, context: str | None, name: str,
           allowed: Iterable[str] = ()) -> JSON:
    """A kubeconfig document with only ``context`` (renamed ``name``), files inlined."""
    resolved = config.context(context)  # raises naming what is missing
    user = dict(config.users.get(resolved.user_name, {})) if resolved.user_name else {}
    check_exec(resolved.name, user, allowed)
    cluster: JSON = {"server": resolved.server}
    if resolved.ca_data:
        cluster["certificate-authority-data"] = _b64(resolved.ca_data)
    if resolved.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    if resolved.tls_server_name:
        cluster["tls-server-name"] = resolved.tls_server_name
    if resolved.disable_compression:
        cluster["disable-compression"] = True
    out_user: JSON = {}
    if resolved.client_cert_data:
        out_user["client-certificate-data"] = _b64(resolved.client_cert_data)
    if resolved.client_key_data:
        out_user["client-key-data"] = _b64(resolved.client_key_data)
    token = resolved.token
    if resolved.token_file is not None:
        try:
            token = resolved.token_file.read_text().strip()
        except OSError as exc:
            raise MinifyError(f"context {resolved.name!r}: cannot read tokenFile "
                              f"{resolved.token_file}: {exc.strerror}") from None
    if token:
        out_user["token"] = token
    if resolved.username:
        out_user["username"] = resolved.username
    if resolved.password:
        out_user["password"] = resolved.password
    if resolved.exec_config:
        out_user["exec"] = dict(resolved.exec_config)
    context_entry: JSON = {"cluster": name, "user": name}
    if resolved.namespace != "default":
        context_entry["namespace"] = resolved.namespace
    return {"apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": out_user}],
            "contexts": [{"name": name, "context": context_entry}]}


def dump(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(document), sort_keys=False)


def load(data: bytes | str, name: str, origin: str, allowed: Iterable[str] = ()
         ) -> kubeconfig.KubeConfig:
    """A stored kubeconfig, read within limits (:func:`kubeconfig.parse`: a hostile Secret
    is one line naming ``origin``, never its content) and checked again (exec allowlist)
    before anything uses it."""
    document = kubeconfig.parse(data, origin)
    config = kubeconfig.merge([(Path(origin), document)])
    if name not in config.contexts:
        raise MinifyError(f"{origin}: has no context {name!r}")
    user_name = config.contexts[name].get("user") or ""
    if not isinstance(user_name, str):
        raise MinifyError(f"{origin}: context {name!r}: user is not a string")
    check_exec(name, config.users.get(user_name, {}), allowed)
    if any(isinstance(c.get("certificate-authority"), str) for c in config.clusters.values()) \
            or any(k in u for u in config.users.values()
                   for k in ("client-certificate", "client-key", "tokenFile")):
        raise MinifyError(f"{origin}: refers to files; a stored kubeconfig must inline them")
    return config


def secret_kubeconfig(secret: Mapping[str, Any], key: str = SECRET_KEY) -> bytes:
    """The kubeconfig bytes held in a Secret (``data`` is base64, ``stringData`` is not)."""
    meta = secret.get("metadata") or {}
    where = f"Secret {meta.get('namespace')}/{meta.get('name')}"
    data = (secret.get("data") or {}).get(key)
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except ValueError:
            raise MinifyError(f"{where}: key {key!r} is not base64") from None
    text = (secret.get("stringData") or {}).get(key)
    if text:
        return str(text).encode()
    raise MinifyError(f"{where} has no key {key!r}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
