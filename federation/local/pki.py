"""Certificates and keys for one local cluster.

Every cluster of the local fleet gets its own certificate authority, so a
client configured for one cluster cannot talk to another by accident and every
kubeconfig entry carries its own ``certificate-authority-data``: the same shape
as a fleet of real, independently provisioned clusters. The CA signs the API
server's serving certificate (valid for 127.0.0.1 and localhost), an admin
client certificate in ``system:masters`` (kubectl, tests, ``fedctl install``)
and a client certificate for the control plane, ``federation:control-plane``
in no group at all: what it may do is only what the RBAC of
:mod:`federation.rbac` grants it, never ``system:masters``. A static token for
a second admin identity is written for tests that exercise token
authentication.

Keys are ECDSA P-256: generating one takes microseconds, where RSA-2048 costs
tens of milliseconds, and kube-apiserver, Go's TLS stack and Python's ssl
module all accept them.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
ADMIN_USER = "fleet-admin"
TOKEN_USER = "fleet-token-admin"
CONTROL_PLANE_USER = "federation:control-plane"
"""The control plane's user name; federation.rbac binds its roles to it (kept equal by a test)."""


@dataclasses.dataclass(frozen=True)
class ClusterPKI:
    """Paths of one cluster's certificates, keys and token file."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def server_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"

    @property
    def control_plane_cert(self) -> Path:
        return self.directory / "control-plane.crt"

    @property
    def control_plane_key(self) -> Path:
        return self.directory / "control-plane.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    def exists(self) -> bool:
        files = (self.ca_cert, self.server_cert, self.admin_cert, self.service_account_key,
                 self.token_file)
        return all(path.exists() for path in files)

    def admin_token(self) -> str:
        return self.token_file.read_text().split(",", 1)[0]


def ensure(directory: Path, cluster_name: str) -> ClusterPKI:
    """Create the cluster's PKI unless it is already there (``up`` is idempotent)."""
    pki = ClusterPKI(directory)
    if pki.exists():
        _ensure_control_plane(pki)
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _new_key()
    ca_cert = _ca_certificate(ca_key, f"federation-local-{cluster_name}-ca")
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.ca_cert, ca_cert)

    server_key = _new_key()
    _write_key(pki.server_key, server_key)
    _write_cert(pki.server_cert, _server_certificate(server_key, ca_key, ca_cert))

    admin_key = _new_key()
    _write_key(pki.admin_key, admin_key)
    _write_cert(pki.admin_cert, _client_certificate(admin_key, ca_key, ca_cert,
                                                    _name(ADMIN_USER, "system:masters")))

    sa_key = _new_key()
    _write_key(pki.service_account_key, sa_key)
    pki.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    token = secrets.token_urlsafe(32)
    _write_private(pki.token_file, f'{token},{TOKEN_USER},{TOKEN_USER},"system:masters"\n'.encode())
    _ensure_control_plane(pki)
    return pki


def _ensure_control_plane(pki: ClusterPKI) -> None:
    """The control plane's certificate, signed by the cluster's CA; added to a PKI made
    before it existed, so an older fleet gets it on its next ``up``."""
    if pki.control_plane_cert.exists() and pki.control_plane_key.exists():
        return
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    key = _new_key()
    _write_key(pki.control_plane_key, key)
    _write_cert(pki.control_plane_cert,
                _client_certificate(key, ca_key, ca_cert, _name(CONTROL_PLANE_USER)))


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
             ) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _ca_certificate(key: ec.EllipticCurvePrivateKey, common_name: str) -> x509.Certificate:
    name = _name(common_name)
    return (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                          content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _leaf(key: ec.EllipticCurvePrivateKey, ca_key: ec.EllipticCurvePrivateKey,
          ca_cert: x509.Certificate, subject: x509.Name, usage: x509.ObjectIdentifier
          ) -> x509.CertificateBuilder:
    return (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                          crl_sign=False, content_commitment=False, data_encipherment=False,
                          key_agreement=False, encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )


def _server_certificate(key: ec.EllipticCurvePrivateKey, ca_key: ec.EllipticCurvePrivateKey,
                        ca_cert: x509.Certificate) -> x509.Certificate:
    names: list[x509.GeneralName] = [
        x509.DNSName(dns) for dns in
        ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
    ]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", "10.0.0.1")]
    return (
        _leaf(key, ca_key, ca_cert, _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _client_certificate(key: ec.EllipticCurvePrivateKey, ca_key: ec.EllipticCurvePrivateKey,
                        ca_cert: x509.Certificate, subject: x509.Name) -> x509.Certificate:
    """A client certificate: the CN is the user, each O a group (none for the control plane)."""
    return _leaf(key, ca_key, ca_cert, subject, ExtendedKeyUsageOID.CLIENT_AUTH).sign(
        ca_key, hashes.SHA256()
    )


def _write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(data)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    _write_private(path, key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
