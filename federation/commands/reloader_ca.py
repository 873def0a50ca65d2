"""The reloaders' CA put together: the hub Secret, a server certificate, the client's.

The pieces live in two packages that may not know each other (the CA Secret helpers in
:mod:`federation.work.identity`, the names in :mod:`federation.hub.rollouts`), so the
commands layer joins them:

- :func:`server_files`: ensure the CA (hub Secret ``federation-reloader-ca``) and write a
  reloader's ``tls.crt``/``tls.key`` (0600)/``ca.crt``: server-auth, DNS name
  ``reloader.federation.io``. The local fleet's simulator (``fedctl local simulate``)
  gives every reloader it starts these files.
- :func:`client_tls`: read the CA (never create it: the control plane has no business
  minting CAs) and issue the rollout controller's client certificate, CN
  ``federation-reconfigure`` (the reloaders' ``--allow-client``), held in memory only.
"""

from __future__ import annotations

from pathlib import Path

from federation.commands.join import write_agent_files
from federation.contexts.client import ObjectClient
from federation.hub.rollouts import (
    RELOADER_CA_SECRET,
    RELOADER_CLIENT_NAME,
    RELOADER_SERVER_NAME,
)
from federation.reloader.client import ClientTLS
from federation.work import identity

SERVER_COMMON_NAME = "federation-reloader"


def server_certificate(ca: identity.CA) -> tuple[bytes, bytes]:
    """(certificate, key) PEMs a reloader serves with."""
    return identity.issue_server(ca, [RELOADER_SERVER_NAME], common_name=SERVER_COMMON_NAME)


async def server_files(hub: ObjectClient, directory: Path) -> dict[str, Path]:
    """Ensure the reloaders' CA on the hub and write a server certificate into
    ``directory``; the paths by role (``cert``, ``key``, ``ca``)."""
    ca = await identity.ensure_ca(hub, RELOADER_CA_SECRET)
    cert, key = server_certificate(ca)
    return write_agent_files(directory, cert, key, ca.cert_pem)


def client_tls_from(ca: identity.CA) -> ClientTLS:
    cert, key = identity.issue_client(ca, RELOADER_CLIENT_NAME)
    return ClientTLS(ca_pem=ca.cert_pem, cert_pem=cert, key_pem=key)


async def client_tls(hub: ObjectClient) -> ClientTLS:
    """The rollout controller's credentials for reloaders, from the hub's reloader CA
    (:class:`identity.CAMissing` when nobody made it yet)."""
    return client_tls_from(await identity.load_ca(hub, RELOADER_CA_SECRET))
