"""Agents' identities: a work CA kept in a hub Secret, one client certificate per cluster.

The work server and its agents authenticate each other with mutual TLS against one CA,
made on first use by ``fedctl join NAME --mode pull`` (or ``fedctl local up --pull``) and
kept in the hub Secret ``federation-system/federation-work-ca`` (``tls.crt``, ``tls.key``),
which only admins and the control plane (RBAC: get Secrets in ``federation-system``) can
read. An agent's certificate names exactly its cluster (CN = the cluster name, the only
name in it, organisation :data:`AGENT_ORGANIZATION`, client-auth only); the server refuses
a stream whose ``Hello`` names another cluster (:func:`check_peer`). The server's own
certificate is issued at its start from the same CA, for the addresses it is told to serve.

The same helpers keep other CAs in other Secrets of ``federation-system``: every function
that reads or writes the Secret takes its name (default: the work CA's), and
:func:`issue_server` / :func:`issue_client` take the certificate's common name. The
reloaders' CA (issue 13, ``federation-reloader-ca``) is one: its server certificates name
the reloaders' service name, its client certificate the rollout controller
(:mod:`federation.commands.reloader_ca` puts the pieces together; this module knows no
names but the work CA's).

Certificates last :data:`AGENT_VALIDITY`. An agent asks for a new one over its stream
once :func:`needs_renewal` says two thirds of the lifetime have passed; the server signs it
(:func:`sign_csr`) only for the stream's own cluster, only for the key of the certificate
that stream presented (a stolen certificate cannot be turned into one for a key its thief
made) and only when that certificate is due.

Each pull member has one current certificate: its serial is recorded on the hub in the
MemberCluster's ``status.agentCertificate`` (:class:`CertificateRecord`), by ``fedctl
join`` when it issues one and by the control plane when it renews one, and the work server
refuses every other serial. A re-join therefore revokes the certificate it replaces. A
renewal keeps the certificate it replaced (``previousSerial``) acceptable until the new one
is first used, so an answer lost with its stream does not lock the agent out.

Nothing here logs or returns a private key except to the caller that owns it.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from federation.contexts.client import JSON, ApiError, ObjectClient, Resource

SECRETS = Resource("", "v1", "secrets", "Secret")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SECRET_NAMESPACE = "federation-system"
SECRET_NAME = "federation-work-ca"
AGENT_ORGANIZATION = "federation:agents"
CA_VALIDITY = datetime.timedelta(days=3650)
"""The CA outlives every certificate it signs by far; rotating it is a new Secret."""
AGENT_VALIDITY = datetime.timedelta(days=90)
"""A certificate nobody renews ends within a quarter; agents renew at two thirds (day 60)
over their stream, so an agent offline for a month still renews in time. A renewal keeps
the key: rotating it is a re-join, which also revokes the old certificate."""
RECORD_FIELD = "agentCertificate"
"""The MemberCluster status field holding the pull member's :class:`CertificateRecord`."""
SERVER_VALIDITY = datetime.timedelta(days=90)
"""The server's certificate is re-issued at every start of the control plane."""
CLIENT_VALIDITY = datetime.timedelta(days=90)
"""A control-plane client certificate (the rollout controller's, for reloaders) is issued
at each start of the process that uses it, so a quarter is ample."""


class IdentityError(ValueError):
    """A certificate, CSR or CA Secret that cannot be used (the message says which part)."""


class CAMissing(IdentityError):
    """The CA Secret does not exist on the hub (:func:`ensure_ca` creates it then)."""


@dataclasses.dataclass(frozen=True)
class CA:
    cert_pem: bytes
    key_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @property
    def key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise IdentityError("the CA key is not an EC key")
        return key


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def new_ca(now: datetime.datetime | None = None, common_name: str = SECRET_NAME) -> CA:
    now = now or _now()
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(key, hashes.SHA256()))
    return CA(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))


def _leaf(ca: CA, subject: x509.Name, public_key: ec.EllipticCurvePublicKey,
          usage: x509.ObjectIdentifier, validity: datetime.timedelta,
          sans: Sequence[x509.GeneralName], now: datetime.datetime | None) -> bytes:
    now = now or _now()
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca.cert.subject)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + validity)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(ca.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def agent_subject(cluster: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, AGENT_ORGANIZATION),
                      x509.NameAttribute(NameOID.COMMON_NAME, cluster)])


def issue_agent(ca: CA, cluster: str, now: datetime.datetime | None = None,
                validity: datetime.timedelta = AGENT_VALIDITY) -> tuple[bytes, bytes]:
    """(certificate, key) PEMs for the agent of ``cluster``; the CN is the cluster name."""
    key = new_key()
    cert = _leaf(ca, agent_subject(cluster), key.public_key(), ExtendedKeyUsageOID.CLIENT_AUTH,
                 validity, [x509.DNSName(cluster)], now)
    return cert, key_pem(key)


def issue_server(ca: CA, hosts: Sequence[str], now: datetime.datetime | None = None,
                 common_name: str = "federation-work-server") -> tuple[bytes, bytes]:
    """(certificate, key) PEMs of a server (server-auth only), valid for ``hosts`` (names
    or IPs); the work server's unless ``common_name`` says otherwise."""
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    key = new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = _leaf(ca, subject, key.public_key(), ExtendedKeyUsageOID.SERVER_AUTH,
                 SERVER_VALIDITY, sans, now)
    return cert, key_pem(key)


def issue_client(ca: CA, common_name: str, now: datetime.datetime | None = None,
                 validity: datetime.timedelta = CLIENT_VALIDITY) -> tuple[bytes, bytes]:
    """(certificate, key) PEMs of a client (client-auth only) named ``common_name`` and
    nothing else: no organisation, so it is never taken for an agent."""
    key = new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = _leaf(ca, subject, key.public_key(), ExtendedKeyUsageOID.CLIENT_AUTH, validity,
                 [], now)
    return cert, key_pem(key)


def load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    """The EC private key of a PEM file (an agent's own, to sign its renewal request)."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        raise IdentityError("not a PEM private key without a password") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise IdentityError("the key is not an EC key")
    return key


def csr(cluster: str, key: ec.EllipticCurvePrivateKey) -> bytes:
    request = (x509.CertificateSigningRequestBuilder().subject_name(agent_subject(cluster))
               .sign(key, hashes.SHA256()))
    return request.public_bytes(serialization.Encoding.PEM)


def sign_csr(ca: CA, csr_pem: bytes, cluster: str, presented: Presented,
             now: datetime.datetime | None = None) -> bytes:
    """A renewed agent certificate for ``cluster`` (the stream's own), for the key of the
    certificate the stream ``presented``: refused when the CSR is malformed, badly signed,
    names anything but that cluster or holds another key, or when ``presented`` is not due
    for renewal (:func:`renewal_due`). CPU-bound: the work server calls it off its loop."""
    try:
        request = x509.load_pem_x509_csr(csr_pem)
    except ValueError:
        raise IdentityError("renewal: the CSR is not a PEM certificate request") from None
    if not request.is_signature_valid:
        raise IdentityError("renewal: the CSR's signature does not verify")
    names = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if [n.value for n in names] != [cluster]:
        raise IdentityError(f"renewal: the CSR must name exactly cluster {cluster!r}")
    public = request.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise IdentityError("renewal: the CSR's key must be an EC key")
    if _public_der(public) != presented.public_key:
        raise IdentityError("renewal: the CSR's key is not the key of the certificate this "
                            "stream presented (a new key needs a re-join)")
    if not renewal_due(presented, now):
        raise IdentityError(f"renewal: the certificate is not due for renewal before "
                            f"{presented.due:%Y-%m-%dT%H:%M:%SZ}")
    return _leaf(ca, agent_subject(cluster), public, ExtendedKeyUsageOID.CLIENT_AUTH,
                 AGENT_VALIDITY, [x509.DNSName(cluster)], now)


def _public_der(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclasses.dataclass(frozen=True)
class Presented:
    """What the work server needs of the client certificate a stream presented."""

    serial: str
    """Lower-case hex, as :class:`CertificateRecord` keeps it."""
    public_key: bytes
    """DER SubjectPublicKeyInfo: a renewal must be for this key."""
    not_before: datetime.datetime
    not_after: datetime.datetime

    @property
    def due(self) -> datetime.datetime:
        """Two thirds of the lifetime: the earliest renewal."""
        return self.not_before + (self.not_after - self.not_before) * 2 / 3


def presented(cert_pem: bytes) -> Presented:
    """The :class:`Presented` of a PEM certificate (the handshake verified it already)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise IdentityError("the client certificate is not a PEM certificate") from None
    public = cert.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise IdentityError("the client certificate's key is not an EC key")
    return Presented(serial_text(cert.serial_number), _public_der(public),
                     cert.not_valid_before_utc, cert.not_valid_after_utc)


def serial_text(serial: int) -> str:
    return format(serial, "x")


def serial_of(cert_pem: bytes) -> str:
    return serial_text(x509.load_pem_x509_certificate(cert_pem).serial_number)


def renewal_due(cert: Presented, now: datetime.datetime | None = None) -> bool:
    return (now or _now()) >= cert.due


@dataclasses.dataclass(frozen=True)
class CertificateRecord:
    """A pull member's accepted agent certificates, kept in its MemberCluster's status.

    ``serial`` is the current certificate's; ``previous`` the one a renewal replaced,
    accepted only until ``serial`` is first presented. Empty: no certificate is recorded
    (a member joined before certificates were recorded), and every stream is refused."""

    serial: str = ""
    previous: str = ""

    def accepts(self, serial: str) -> bool:
        return bool(serial) and serial in (self.serial, self.previous)

    def refusal(self, serial: str, cluster: str) -> str | None:
        """Why a certificate with ``serial`` may not open ``cluster``'s stream (None: it may)."""
        if not self.serial:
            return (f"no agent certificate is recorded for cluster {cluster!r} (MemberCluster "
                    f"status.{RECORD_FIELD}): join it again with `fedctl join {cluster} "
                    "--mode pull`")
        if not self.accepts(serial):
            return (f"certificate serial {serial} is not cluster {cluster!r}'s current one: "
                    "it was revoked by a re-join or replaced by a renewal")
        return None

    @classmethod
    def of(cls, member: Mapping[str, Any] | None) -> CertificateRecord:
        """The record in a MemberCluster (empty when absent or not strings)."""
        status = (member or {}).get("status")
        found = status.get(RECORD_FIELD) if isinstance(status, Mapping) else None
        if not isinstance(found, Mapping):
            return cls()
        serial, previous = found.get("serial"), found.get("previousSerial")
        return cls(serial if isinstance(serial, str) else "",
                   previous if isinstance(previous, str) else "")

    def status_patch(self) -> JSON:
        """The merge patch of the MemberCluster status that records this (and nothing
        else: ``previousSerial`` is removed when there is none)."""
        return {"status": {RECORD_FIELD: {"serial": self.serial,
                                          "previousSerial": self.previous or None}}}


def common_name(cert_pem: bytes) -> str:
    cert = x509.load_pem_x509_certificate(cert_pem)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def needs_renewal(cert_pem: bytes, now: datetime.datetime | None = None) -> bool:
    """Two thirds of the certificate's lifetime have passed."""
    return renewal_due(presented(cert_pem), now)


def check_peer(peer_names: Sequence[str], cluster: str) -> str | None:
    """Why a stream whose client certificate has CNs ``peer_names`` may not speak for
    ``cluster`` (None: it may)."""
    if list(peer_names) != [cluster]:
        shown = ", ".join(peer_names) or "none"
        return f"the client certificate names {shown}, not cluster {cluster!r}"
    return None


# -- the hub Secret ------------------------------------------------------------------------

def ca_secret(ca: CA, name: str = SECRET_NAME) -> JSON:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": SECRET_NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "federation"}},
            "data": {"tls.crt": base64.b64encode(ca.cert_pem).decode(),
                     "tls.key": base64.b64encode(ca.key_pem).decode()}}


def ca_from_secret(secret: JSON, name: str = SECRET_NAME) -> CA:
    data = secret.get("data") or {}
    try:
        ca = CA(base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"]))
        _ = ca.cert, ca.key
    except (KeyError, ValueError) as exc:
        raise IdentityError(f"Secret {SECRET_NAMESPACE}/{name}: tls.crt and tls.key "
                            f"must hold a PEM CA certificate and key ({type(exc).__name__})"
                            ) from None
    return ca


async def load_ca(hub: ObjectClient, name: str = SECRET_NAME) -> CA:
    """The CA kept in hub Secret ``name`` (the work CA by default; read only)."""
    try:
        secret = await hub.get(SECRETS, name, SECRET_NAMESPACE)
    except ApiError as exc:
        if exc.status == 404:
            hint = ": `fedctl join NAME --mode pull` creates it" if name == SECRET_NAME else ""
            raise CAMissing(f"no Secret {SECRET_NAMESPACE}/{name} on the hub{hint}") from None
        raise
    return ca_from_secret(secret, name)


async def ensure_ca(hub: ObjectClient, name: str = SECRET_NAME) -> CA:
    """The CA of hub Secret ``name``, created (CN = ``name``) when missing (admins: join,
    local up, the local fleet's simulator)."""
    try:
        return await load_ca(hub, name)
    except CAMissing:
        pass
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": SECRET_NAMESPACE}}
    try:
        await hub.create(NAMESPACES, namespace)
    except ApiError as exc:
        if exc.status != 409:
            raise
    ca = new_ca(common_name=name)
    try:
        await hub.create(SECRETS, ca_secret(ca, name))
    except ApiError as exc:
        if exc.status != 409:
            raise
        return await load_ca(hub, name)  # made by a concurrent caller: use that one
    return ca
