"""Where an agent keeps its certificate, key and the work CA: files, or a Secret of its member.

The agent reads its :class:`Bundle` from its :class:`Store` at every connect and, when the
hub renews its certificate, stores the new one *before* using it
(:meth:`Store.save_certificate`): the hub stops accepting the replaced certificate once the
new one has connected, so a renewal that was used but not kept would lock the next start of
the agent out (PERMISSION_DENIED until a re-join). A renewal that cannot be stored is not
used; the agent asks again at its next check, and the hub signs again for the certificate
it still accepts.

- :class:`FileStore` (``--tls-cert``, ``--tls-key``, ``--tls-ca``): the files ``fedctl join
  NAME --mode pull`` wrote; a renewal replaces ``--tls-cert`` (a new file, then a rename).
- :class:`SecretStore` (``--tls-secret NAMESPACE/NAME``): a ``kubernetes.io/tls`` Secret of
  the agent's own member (``tls.crt``, ``tls.key``, ``ca.crt``), read and updated through
  the member's API with the agent's credentials: in a pod the ServiceAccount of
  ``config/agent``, whose Role allows ``get`` and ``update`` of that one Secret. A pod that
  restarts after a renewal so starts with the renewed certificate. An update is
  conditional (the resourceVersion read) and only for the key the Secret holds: after a
  re-join wrote a new key there, a renewal of the old key is refused, not written over it,
  and the next connect reads the re-join's pair.

Nothing here logs or puts into an error the content of a key, a certificate or a Secret.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import os
import re
from pathlib import Path
from typing import Protocol

from federation.contexts.client import JSON, ClientError, Resource
from federation.work import identity

SECRETS = Resource("", "v1", "secrets", "Secret")
CERT_KEY, KEY_KEY, CA_KEY = "tls.crt", "tls.key", "ca.crt"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class CredentialsError(ValueError):
    """The credentials cannot be read, are not the cluster's, or a renewal cannot be kept;
    the message names the file or Secret (and key), never its content."""


@dataclasses.dataclass(frozen=True)
class Bundle:
    cert_pem: bytes
    key_pem: bytes = dataclasses.field(repr=False)
    ca_pem: bytes


class Store(Protocol):
    """Where the agent's credentials live (see the module docstring)."""

    def describe(self) -> str:
        """What to name in a message: the files or the Secret."""
        ...

    async def load(self) -> Bundle:
        """The current credentials; CredentialsError or ClientError if unreadable."""
        ...

    async def save_certificate(self, cert_pem: bytes) -> None:
        """Keep a renewed certificate for the current key; raise if it was not kept."""
        ...


def check(bundle: Bundle, cluster: str, where: str) -> Bundle:
    """``bundle`` if its certificate names exactly ``cluster`` and is for its key."""
    try:
        named = identity.common_name(bundle.cert_pem)
        cert_key = identity.presented(bundle.cert_pem).public_key
        own_key = identity.public_der(identity.load_key(bundle.key_pem))
    except ValueError:
        raise CredentialsError(f"{where}: the certificate or key is not a PEM EC "
                               "certificate or key") from None
    if named != cluster:
        raise CredentialsError(f"{where}: the certificate names cluster {named!r}, not "
                               f"{cluster!r}")
    if cert_key != own_key:
        raise CredentialsError(f"{where}: the certificate is not for the key beside it")
    return bundle


class FileStore:
    def __init__(self, cert: Path, key: Path, ca: Path) -> None:
        self.cert, self.key, self.ca = cert, key, ca

    def describe(self) -> str:
        return f"--tls-cert {self.cert}"

    async def load(self) -> Bundle:
        return Bundle(_read(self.cert), _read(self.key), _read(self.ca))

    async def save_certificate(self, cert_pem: bytes) -> None:
        try:
            write_private(self.cert, cert_pem)
        except OSError as exc:
            raise CredentialsError(f"{self.cert}: {exc.strerror}") from None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CredentialsError(f"{path}: {exc.strerror}") from None


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` by a new file of mode 0600 (a reader sees the old or the new one)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


class SecretClient(Protocol):
    """What :class:`SecretStore` needs of a member's client."""

    async def get(self, resource: Resource, name: str, namespace: str | None = None
                  ) -> JSON: ...

    async def replace(self, resource: Resource, body: JSON, subresource: str | None = None
                      ) -> JSON: ...


def parse_secret_ref(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` of ``--tls-secret``; ValueError naming the flag if malformed."""
    namespace, slash, name = text.partition("/")
    if not slash or not _NAME.fullmatch(namespace) or not _NAME.fullmatch(name):
        raise ValueError(f"--tls-secret {text!r}: expected NAMESPACE/NAME of a Secret")
    return namespace, name


class SecretStore:
    def __init__(self, client: SecretClient, namespace: str, name: str) -> None:
        self.client, self.namespace, self.name = client, namespace, name

    def describe(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    async def _get(self) -> JSON:
        try:
            return await self.client.get(SECRETS, self.name, self.namespace)
        except ClientError as exc:
            raise CredentialsError(f"{self.describe()}: {_api_reason(exc)}") from None

    def _field(self, secret: JSON, key: str) -> bytes:
        data = secret.get("data")
        value = data.get(key) if isinstance(data, dict) else None
        try:
            decoded = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
        except (binascii.Error, ValueError):
            decoded = b""
        if not decoded:
            raise CredentialsError(f"{self.describe()} has no {key} (fill it with the files "
                                   "`fedctl join NAME --mode pull` wrote)")
        return decoded

    async def load(self) -> Bundle:
        secret = await self._get()
        return Bundle(*(self._field(secret, key) for key in (CERT_KEY, KEY_KEY, CA_KEY)))

    async def save_certificate(self, cert_pem: bytes) -> None:
        secret = await self._get()
        try:
            held = identity.public_der(identity.load_key(self._field(secret, KEY_KEY)))
            renewed = identity.presented(cert_pem).public_key
        except ValueError:
            raise CredentialsError(f"{self.describe()}: its tls.key or the renewed "
                                   "certificate cannot be read") from None
        if held != renewed:
            raise CredentialsError(f"{self.describe()} holds another key now (a re-join?): "
                                   "the renewed certificate is not written over it")
        data = dict(secret.get("data") or {})
        data[CERT_KEY] = base64.b64encode(cert_pem).decode()
        meta = secret.get("metadata") or {}
        body: JSON = {**secret, "data": data, "metadata": {
            **meta, "namespace": self.namespace, "name": self.name}}
        try:  # conditional: the resourceVersion read is in the body
            await self.client.replace(SECRETS, body)
        except ClientError as exc:
            raise CredentialsError(f"{self.describe()}: the renewed certificate was not "
                                   f"stored: {_api_reason(exc)}") from None


def _api_reason(exc: ClientError) -> str:
    """The API's status, never a body (a Secret's data could be quoted back)."""
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None)
    if status is not None:
        return f"{status} {reason or ''}".strip()
    return str(exc).split(": ", 1)[-1][:200]
