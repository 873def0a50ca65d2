"""Credentials for one context: static tokens, token files, basic auth and exec plugins.

A client asks its :class:`Credentials` for the current :class:`Credential`
before each request and calls :meth:`Credentials.invalidate` when the server
answers 401, then asks again once. What changes over time is fetched again:

- a ``tokenFile`` is re-read at most every :data:`TOKEN_FILE_TTL` seconds (it is
  how projected service-account tokens rotate), and at once after a 401;
- an exec plugin is run again when its credential reaches 80% of its lifetime
  (so it is refreshed before it expires, not after a failed call), when it has
  expired, and after a 401. One run serves all concurrent callers.

Nothing here writes back to the kubeconfig, and no token, key or password is
put in a log line, an exception or a ``repr``: a plugin's failure is reported
with its exit status and the first line of its stderr only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from federation.contexts import kubeconfig

TOKEN_FILE_TTL = 60.0
"""client-go re-reads a token file once a minute; rotated service-account tokens
are valid for at least an hour, so a minute-old read is always still good."""

EXEC_TIMEOUT = 30.0
"""A plugin that fetches a token from a cloud API answers in a second or two;
30 s allows for a slow network, and a hung plugin still surfaces as an error."""

REFRESH_AT = 0.8
"""Fraction of a credential's lifetime after which it is fetched again: early
enough that in-flight calls never carry an expired token, late enough that a
one-hour token costs one plugin run every 48 minutes."""

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class CredentialsError(Exception):
    """Credentials for a context could not be obtained; the message names the context."""


@dataclasses.dataclass(frozen=True)
class Credential:
    """What to present on a request."""

    token: str | None = dataclasses.field(default=None, repr=False)
    client_cert: bytes | None = dataclasses.field(default=None, repr=False)
    client_key: bytes | None = dataclasses.field(default=None, repr=False)
    expires_at: float | None = None
    """Wall-clock expiry (seconds since the epoch), when the issuer gave one."""


class Credentials:
    """Static credentials: a token or none (client certificates live in the TLS context)."""

    refreshable = False

    def __init__(self, context: kubeconfig.Context) -> None:
        self.context = context

    async def get(self) -> Credential:
        return Credential(token=self.context.token)

    def invalidate(self) -> None:
        """The server rejected the credential (401): fetch anew next time, if we can."""


class TokenFileCredentials(Credentials):
    """A bearer token read from a file, re-read periodically and after a 401."""

    refreshable = True

    def __init__(self, context: kubeconfig.Context, path: Path) -> None:
        super().__init__(context)
        self.path = path
        self._cached: Credential | None = None
        self._read_at = 0.0

    async def get(self) -> Credential:
        if self._cached is None or time.monotonic() - self._read_at > TOKEN_FILE_TTL:
            try:
                token = self.path.read_text().strip()
            except OSError as exc:
                raise CredentialsError(f"context {self.context.name!r}: cannot read token file "
                                       f"{self.path}: {exc.strerror}") from None
            self._cached, self._read_at = Credential(token=token), time.monotonic()
        return self._cached

    def invalidate(self) -> None:
        self._cached = None


class ExecCredentials(Credentials):
    """Credentials printed by an exec plugin as an ``ExecCredential``."""

    refreshable = True

    def __init__(self, context: kubeconfig.Context, config: Mapping[str, Any]) -> None:
        super().__init__(context)
        self.config = config
        self.api_version = str(config.get("apiVersion") or "")
        if self.api_version not in EXEC_API_VERSIONS:
            raise CredentialsError(f"context {context.name!r}: exec plugin apiVersion "
                                   f"{self.api_version!r} is not one of {EXEC_API_VERSIONS}")
        if not config.get("command"):
            raise CredentialsError(f"context {context.name!r}: exec plugin has no command")
        self._cached: Credential | None = None
        self._refresh_at = 0.0
        self._lock = asyncio.Lock()
        self.runs = 0
        """How many times the plugin ran (tests and metrics)."""

    def _fresh(self) -> bool:
        return self._cached is not None and time.time() < self._refresh_at

    async def get(self) -> Credential:
        if self._fresh():
            assert self._cached is not None
            return self._cached
        async with self._lock:
            if not self._fresh():
                self._cached = await self._run()
                self._refresh_at = _refresh_time(self._cached, time.time())
            assert self._cached is not None
            return self._cached

    def invalidate(self) -> None:
        self._cached = None

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for item in self.config.get("env") or []:
            env[str(item["name"])] = str(item["value"])
        spec: dict[str, Any] = {"interactive": False}
        if self.config.get("provideClusterInfo"):
            spec["cluster"] = {"server": self.context.server,
                               "insecure-skip-tls-verify": self.context.insecure_skip_tls_verify}
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})
        return env

    async def _run(self) -> Credential:
        name = self.context.name
        command = [str(self.config["command"]), *(str(a) for a in self.config.get("args") or [])]
        try:
            process = await asyncio.create_subprocess_exec(
                *command, env=self._environment(), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            hint = self.config.get("installHint") or ""
            raise CredentialsError(f"context {name!r}: cannot run exec plugin {command[0]!r}: "
                                   f"{exc.strerror}. {hint}".strip()) from None
        try:
            out, err = await asyncio.wait_for(process.communicate(), EXEC_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise CredentialsError(f"context {name!r}: exec plugin {command[0]!r} timed out "
                                   f"after {EXEC_TIMEOUT:.0f}s") from None
        self.runs += 1
        if process.returncode != 0:
            first = (err.decode(errors="replace").strip().splitlines() or ["no output"])[0]
            raise CredentialsError(f"context {name!r}: exec plugin {command[0]!r} exited "
                                   f"{process.returncode}: {first[:200]}")
        return parse_exec_credential(name, self.api_version, out)


def parse_exec_credential(context: str, api_version: str, output: bytes) -> Credential:
    """The credential in a plugin's stdout; errors describe the shape, never the content."""
    try:
        document = json.loads(output)
    except ValueError:
        raise CredentialsError(f"context {context!r}: exec plugin printed no valid JSON"
                               ) from None
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise CredentialsError(f"context {context!r}: exec plugin output is not an "
                               "ExecCredential")
    if document.get("apiVersion") != api_version:
        raise CredentialsError(f"context {context!r}: exec plugin answered with apiVersion "
                               f"{document.get('apiVersion')!r}, expected {api_version!r}")
    status = document.get("status") or {}
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if not token and not (cert and key):
        raise CredentialsError(f"context {context!r}: exec plugin gave neither a token nor a "
                               "client certificate and key")
    expires = status.get("expirationTimestamp")
    return Credential(token=token, client_cert=cert.encode() if cert else None,
                      client_key=key.encode() if key else None,
                      expires_at=_parse_time(context, expires) if expires else None)


def _parse_time(context: str, value: str) -> float:
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise CredentialsError(f"context {context!r}: exec plugin expirationTimestamp "
                               f"{value!r} is not RFC 3339") from None


def _refresh_time(credential: Credential, now: float) -> float:
    if credential.expires_at is None:
        return float("inf")  # valid until the server says otherwise (401)
    return now + max(0.0, credential.expires_at - now) * REFRESH_AT


def for_context(context: kubeconfig.Context) -> Credentials:
    """The credentials source a context asks for (exec, then token file, then static)."""
    if context.exec_config:
        return ExecCredentials(context, context.exec_config)
    if context.token_file:  # as client-go: the file wins over a literal token
        return TokenFileCredentials(context, context.token_file)
    return Credentials(context)
