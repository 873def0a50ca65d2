"""Secure serving of /metrics: TLS, then Kubernetes authentication and authorization.

This is what controller-runtime's secure metrics serving
(``filters.WithAuthenticationAndAuthorization``) and kube-rbac-proxy do, in
aiohttp: the metrics server speaks HTTPS with a
certificate from ``--metrics-cert-dir`` (``tls.crt``, ``tls.key``) or, without
one, a self-signed certificate made at start (its SHA-256 fingerprint is logged
so a scraper can pin it). Each request must carry ``Authorization: Bearer <token>``:

1. **Authentication**: a ``TokenReview`` on the hub says who the token belongs to.
   No token, or a token the hub does not accept: 401.
2. **Authorization**: a ``SubjectAccessReview`` on the hub asks whether that user
   may ``get`` the non-resource URL of the request (``/metrics``); RBAC answers
   (a ClusterRole with ``nonResourceURLs: ["/metrics"], verbs: ["get"]``). Not
   allowed: 403. Allowed: the handler runs.

Answers are cached for ``cache_ttl`` (keyed by the token's SHA-256, never the
token), so a scraper costs the hub two small calls per TTL, not two per scrape.
A review the hub could not answer is not cached and gives 503. Reviews go
through a client of their own with a small budget (``review_qps``): a flood of
made-up tokens is answered 429 without reaching the hub, and can neither drain
the controllers' rate limit nor push back their writes. Tokens never appear in
logs, errors or response bodies.

The hub identity of ``fedctl run`` needs ``create`` on
``tokenreviews.authentication.k8s.io`` and ``subjectaccessreviews.authorization.k8s.io``
(both cluster-scoped and non-persistent) for this.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from federation.contexts.client import ClientError, ObjectClient, Resource

log = logging.getLogger("federation.auth")

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview",
                         namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews",
                                  "SubjectAccessReview", namespaced=False)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
K = TypeVar("K")
V = TypeVar("V")


@dataclasses.dataclass(frozen=True)
class AuthSettings:
    """How /metrics requests are authenticated and authorized."""

    cache_ttl: float = 30.0
    """Seconds a review's answer is reused. Prometheus scrapes every 15-60 s, so one
    scraper costs the hub at most two reviews per 30 s; a revoked token or a removed
    RoleBinding stops working within 30 s, one scrape interval (controller-runtime
    keeps answers 1-5 minutes; we prefer revocation to take effect quickly)."""
    cache_size: int = 1024
    """Answers kept at most; the oldest go first. Far above the number of scrapers,
    and it bounds the memory a flood of made-up tokens can take."""
    review_qps: float = 5.0
    """Reviews per second the hub is asked for, sustained: scrapers hit the cache,
    so only new tokens (or an attacker's) need reviews."""
    review_burst: int = 20
    """Reviews allowed at once: a handful of scrapers starting together."""
    review_timeout: float = 5.0
    """Seconds for one review call: a scrape times out at 10 s by default."""


@dataclasses.dataclass(frozen=True)
class User:
    """Who a token belongs to, as a TokenReview says."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class ReviewUnavailable(Exception):
    """The hub did not answer a review: neither yes nor no (503, not cached)."""


class OverBudget(Exception):
    """A review is needed and the review budget is spent (429, nothing sent)."""


class TTLCache(Generic[K, V]):
    """A small map whose entries expire after ``ttl`` seconds; at most ``size`` entries."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> tuple[bool, V | None]:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self.clock():
            self._entries.pop(key, None)
            return False, None
        return True, entry[1]

    def put(self, key: K, value: V) -> None:
        self._entries.pop(key, None)
        if len(self._entries) >= self.size:
            now = self.clock()
            for stale in [k for k, (expires, _) in self._entries.items() if expires <= now]:
                del self._entries[stale]
            while len(self._entries) >= self.size:  # insertion order: oldest first
                del self._entries[next(iter(self._entries))]
        self._entries[key] = (self.clock() + self.ttl, value)

    def __len__(self) -> int:
        return len(self._entries)


class Budget:
    """At most ``burst`` at once, refilled at ``rate`` per second; :meth:`take` never waits."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._tokens, self._stamp = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class Reviewer:
    """Authenticates bearer tokens and authorizes requests with reviews on the hub."""

    def __init__(self, client: ObjectClient, settings: AuthSettings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.settings = s = settings or AuthSettings()
        self.users: TTLCache[str, User | None] = TTLCache(s.cache_ttl, s.cache_size, clock)
        self.decisions: TTLCache[tuple[User, str, str], bool] = TTLCache(
            s.cache_ttl, s.cache_size, clock)
        self.budget = Budget(s.review_qps, s.review_burst, clock)
        self.reviews = 0
        """Reviews sent to the hub (tests and metrics)."""

    async def _review(self, resource: Resource, spec: dict[str, Any]) -> dict[str, Any]:
        if not self.budget.take():
            raise OverBudget(resource.kind)
        self.reviews += 1
        body = {"apiVersion": resource.api_version, "kind": resource.kind, "spec": spec}
        try:
            answer = await self.client.request("POST", resource.path(), body=body,
                                               timeout=self.settings.review_timeout)
        except ClientError as exc:
            raise ReviewUnavailable(f"{resource.kind} failed: {exc}") from None
        status = answer.get("status")
        return status if isinstance(status, dict) else {}

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the hub does not accept the token."""
        key = hashlib.sha256(token.encode()).hexdigest()
        found, user = self.users.get(key)
        if found:
            return user
        status = await self._review(TOKEN_REVIEWS, {"token": token})
        user = _user(status.get("user")) if status.get("authenticated") is True else None
        self.users.put(key, user)
        return user

    async def authorize(self, user: User, path: str, verb: str = "get") -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
        key = (user, path, verb)
        found, allowed = self.decisions.get(key)
        if found:
            return bool(allowed)
        status = await self._review(SUBJECT_ACCESS_REVIEWS, {
            "user": user.name, "uid": user.uid, "groups": list(user.groups),
            "extra": {k: list(v) for k, v in user.extra},
            "nonResourceAttributes": {"path": path, "verb": verb}})
        allowed = status.get("allowed") is True
        self.decisions.put(key, allowed)
        return allowed

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """401 without an accepted token, 403 when not allowed, else the handler's answer."""
        token = _bearer(request.headers.get("Authorization", ""))
        if token is None:
            return _deny(401, "Unauthorized: a bearer token is required")
        verb = "get" if request.method in ("GET", "HEAD") else request.method.lower()
        try:
            user = await self.authenticate(token)
            if user is None:
                return _deny(401, "Unauthorized: the token was not accepted by the hub")
            if not await self.authorize(user, request.path, verb):
                log.info("denied %s %s to user %r", request.method, request.path, user.name)
                return _deny(403, f"Forbidden: user {user.name!r} may not {verb} "
                                  f"{request.path!r}")
        except OverBudget:
            return _deny(429, "Too many reviews in flight; retry later", retry=True)
        except ReviewUnavailable as exc:
            log.warning("cannot check a request for %s: %s", request.path, exc)
            return _deny(503, "Cannot check the request's credentials now; retry later",
                         retry=True)
        return await handler(request)


def _bearer(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _deny(status: int, message: str, retry: bool = False) -> web.Response:
    headers = {"Retry-After": "1"} if retry else {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="federation"'
    return web.Response(status=status, text=message + "\n", headers=headers)


def _user(raw: Any) -> User | None:
    if not isinstance(raw, dict) or not raw.get("username"):
        return None
    extra = raw.get("extra")
    if not isinstance(extra, dict):
        extra = {}
    return User(name=str(raw["username"]), uid=str(raw.get("uid") or ""),
                groups=tuple(str(g) for g in raw.get("groups") or ()),
                extra=tuple(sorted((str(k), tuple(str(x) for x in v or ()))
                                   for k, v in extra.items())))


# -- TLS ---------------------------------------------------------------------------------


def server_tls(cert_dir: Path | None, host: str) -> tuple[ssl.SSLContext, str]:
    """The TLS context of the metrics server and its certificate's SHA-256 fingerprint.

    From ``cert_dir``/tls.crt and tls.key when given (errors name the file), else a
    self-signed certificate for ``host``, localhost and the host name, made now.
    """
    if cert_dir is not None:
        cert_path, key_path = cert_dir / "tls.crt", cert_dir / "tls.key"
        for path in (cert_path, key_path):
            if not path.is_file():
                raise ValueError(f"--metrics-cert-dir: {path} does not exist")
        try:
            cert_pem = cert_path.read_bytes()
            certificate = x509.load_pem_x509_certificate(cert_pem)
            return _context(cert_path, key_path), _fingerprint(certificate)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise ValueError(f"--metrics-cert-dir: cannot load {cert_path} and {key_path} "
                             f"({exc})") from None
    certificate, key = self_signed(host)
    with tempfile.TemporaryDirectory(prefix="federation-metrics-tls-") as directory:
        cert_path, key_path = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        _write_private(cert_path, certificate.public_bytes(serialization.Encoding.PEM))
        _write_private(key_path, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        return _context(cert_path, key_path), _fingerprint(certificate)


def self_signed(host: str, days: int = 365) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed server certificate for ``host``, ``localhost`` and this host's name."""
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.DNSName(socket.gethostname())]
    for address in {"127.0.0.1", "::1", host}:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            if address:
                names.append(x509.DNSName(address))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "federation-metrics")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(list(dict.fromkeys(names))), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .sign(key, hashes.SHA256()))
    return certificate, key


def _context(cert_path: Path, key_path: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert_path), str(key_path))
    return context


def _fingerprint(certificate: x509.Certificate) -> str:
    return certificate.fingerprint(hashes.SHA256()).hex(":")


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
