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

Exec plugins run a command inside this process's environment, and a kubeconfig
may come from someone who should not choose what runs here (a joined
cluster's Secret, writable by anyone with write access to its namespace on the
hub). So every exec plugin passes :func:`check_exec` first, wherever its
kubeconfig came from: its ``env`` may not set a variable on
:data:`EXEC_ENV_DENIED` (``PATH``, the loader's, the interpreters', the
shells', config and trust relocations), whatever the allowlist says. With an
:class:`ExecAllowlist` (``fedctl join`` and ``fedctl run``), the command must
also be allowed: a bare name on the list (the cloud CLIs of
:data:`EXEC_ALLOWLIST` only with their token subcommand), or exactly an
absolute path the operator listed; any other path, relative or absolute, is
refused. The command is then resolved by :func:`resolve_command` on this
process's own ``PATH`` (absolute directories only), before and without the
kubeconfig's ``env``, and run by that absolute path, never through a shell,
so nothing resolves it again. Without an allowlist (a user's own kubeconfig
on the command line, trusted as kubectl trusts it) the same env and path
rules apply, only the command list does not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import re
import time
import types
from collections.abc import Iterable, Mapping, Sequence
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
            try:  # capped: a tokenFile of /dev/zero must not fill the memory
                token = kubeconfig.read_capped(self.path).decode().strip()
            except OSError as exc:
                raise CredentialsError(f"context {self.context.name!r}: cannot read token file "
                                       f"{self.path}: {exc.strerror}") from None
            except ValueError as exc:  # too large, or not UTF-8: say which, quote nothing
                reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else str(exc)
                raise CredentialsError(f"context {self.context.name!r}: token file "
                                       f"{self.path}: {reason}") from None
            self._cached, self._read_at = Credential(token=token), time.monotonic()
        return self._cached

    def invalidate(self) -> None:
        self._cached = None


class ExecCredentials(Credentials):
    """Credentials printed by an exec plugin as an ``ExecCredential``.

    The plugin is checked (:func:`check_exec`) and its command resolved to an
    absolute path (:func:`resolve_command`) here, once: a context that is refused
    never gets an instance, so nothing can run it."""

    refreshable = True

    def __init__(self, context: kubeconfig.Context, config: Mapping[str, Any],
                 allowlist: ExecAllowlist | None = None) -> None:
        super().__init__(context)
        self.spec = check_exec(context.name, config, allowlist)
        self.api_version = self.spec.api_version
        self.executable = resolve_command(context.name, self.spec,
                                          hint=allowlist is None)
        """Absolute path the plugin runs from, found on this process's own PATH."""
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
        env.update(self.spec.env)  # checked: nothing on EXEC_ENV_DENIED
        spec: dict[str, Any] = {"interactive": False}
        if self.spec.provide_cluster_info:
            spec["cluster"] = {"server": self.context.server,
                               "insecure-skip-tls-verify": self.context.insecure_skip_tls_verify}
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})
        return env

    async def _run(self) -> Credential:
        name, shown = self.context.name, self.spec.command
        try:
            # The absolute path, as a list (never a shell): nothing looks it up again.
            process = await asyncio.create_subprocess_exec(
                self.executable, *self.spec.args, env=self._environment(),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            raise CredentialsError(f"context {name!r}: cannot run exec plugin {shown!r} "
                                   f"({self.executable}): {exc.strerror}") from None
        try:
            out, err = await asyncio.wait_for(process.communicate(), EXEC_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise CredentialsError(f"context {name!r}: exec plugin {shown!r} timed out "
                                   f"after {EXEC_TIMEOUT:.0f}s") from None
        self.runs += 1
        if process.returncode != 0:
            first = (err.decode(errors="replace").strip().splitlines() or ["no output"])[0]
            raise CredentialsError(f"context {name!r}: exec plugin {shown!r} exited "
                                   f"{process.returncode}: {_printable(first, 200)}")
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


def for_context(context: kubeconfig.Context,
                allowlist: ExecAllowlist | None = None) -> Credentials:
    """The credentials source a context asks for (exec, then token file, then static).

    ``allowlist``: the exec commands this process may run (None: any, as kubectl, for a
    user's own kubeconfig); the env and path rules of :func:`check_exec` apply anyway."""
    if context.exec_config:
        return ExecCredentials(context, context.exec_config, allowlist)
    if context.token_file:  # as client-go: the file wins over a literal token
        return TokenFileCredentials(context, context.token_file)
    return Credentials(context)


# -- the exec plugin policy ------------------------------------------------------------


class ExecRefused(CredentialsError):
    """An exec plugin the policy refuses; the message names the context and the rule."""


@dataclasses.dataclass(frozen=True)
class Subcommand:
    """The one command line a general-purpose CLI on the default allowlist may run.

    ``aws`` with free arguments is the whole AWS API with the control plane's
    identity (``aws iam create-access-key ...``); as a credential plugin it only
    needs ``aws eks get-token``. The arguments must start with :attr:`words`, after
    any of :attr:`options` (global options taking one value, ``--region x`` or
    ``--region=x``); what follows is the token command's own options."""

    words: tuple[str, ...]
    options: frozenset[str] = frozenset()

    def allows(self, args: Sequence[str]) -> bool:
        i = 0
        while i < len(args) and args[i].split("=", 1)[0] in self.options:
            i += 1 if "=" in args[i] else 2
        return tuple(args[i:i + len(self.words)]) == self.words

    def __str__(self) -> str:
        return " ".join(self.words)


EXEC_ALLOWLIST: Mapping[str, Subcommand | None] = types.MappingProxyType({
    "aws": Subcommand(("eks", "get-token"), frozenset({"--region", "--profile", "--output"})),
    "aws-iam-authenticator": Subcommand(("token",)),
    "gke-gcloud-auth-plugin": None,
    "kubelogin": Subcommand(("get-token",)),
    "oci": Subcommand(("ce", "cluster", "generate-token"), frozenset({"--region", "--profile"})),
    "doctl": Subcommand(("kubernetes", "cluster", "kubeconfig", "exec-credential"),
                        frozenset({"--context"})),
})
"""Exec plugins allowed by default: the cloud providers' own, by bare name (found on the
control plane's PATH, which its operator controls), each held to its token subcommand
(``gke-gcloud-auth-plugin`` does nothing else). ``--allow-exec-command`` adds more,
trusted with any arguments."""

EXEC_ENV_DENIED = frozenset({
    # where programs are found, and what shells run before and around a script
    "PATH", "SHELL", "ENV", "BASH_ENV", "IFS", "CDPATH", "SHELLOPTS", "BASHOPTS", "PS4",
    "PROMPT_COMMAND",
    # interpreters loading code from a path or an option string
    "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    # glibc loading code or data from a path
    "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES",
    # the plugin's configuration, moved somewhere else (a config can name a command to
    # run, e.g. AWS credential_process), and commands a CLI may start (pager, browser)
    "HOME", "XDG_CONFIG_HOME", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
    "CLOUDSDK_CONFIG", "OCI_CLI_CONFIG_FILE", "AZURE_CONFIG_DIR", "AZURE_AUTHORITY_HOST",
    # Google credential files may name a program to run (external accounts' executable
    # source, when this switch allows it)
    "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES",
    "PAGER", "AWS_PAGER", "EDITOR", "VISUAL", "BROWSER",
    # whom TLS trusts, and where requests go (IMDS credentials travel over plain HTTP)
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
    # ours: the plugin's view of the cluster
    "KUBERNETES_EXEC_INFO",
})
"""Variables a kubeconfig's ``exec.env`` may never set (compared case-insensitively): each
would let the kubeconfig choose code, configuration or trust inside the plugin, which runs
with this process's identity. ``HOME`` is here because every dotfile the plugin reads
follows it; ``SHELL`` because tools start it for sub-commands. Also every name starting
with one of :data:`EXEC_ENV_DENIED_PREFIXES`."""

EXEC_ENV_DENIED_PREFIXES = ("LD_", "DYLD_", "PYTHON", "PERL", "RUBY", "NODE_", "BASH_FUNC_",
                            "AWS_ENDPOINT_URL", "CLOUDSDK_PYTHON", "OPENSSL_")
"""The dynamic loaders (``LD_PRELOAD``, ``LD_AUDIT``, ``DYLD_INSERT_LIBRARIES``...), the
script interpreters' path and option variables (gcloud's ``CLOUDSDK_PYTHON`` and
``CLOUDSDK_PYTHON_ARGS`` too: its wrapper runs ``$CLOUDSDK_PYTHON $CLOUDSDK_PYTHON_ARGS``),
OpenSSL's configuration and module paths (``OPENSSL_CONF`` can load an engine), bash's
exported functions (a ``BASH_FUNC_aws%%`` replaces a command inside any bash script the
plugin runs), and AWS endpoint overrides."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class ExecAllowlist:
    """The exec commands a process may run: :data:`EXEC_ALLOWLIST` plus ``extra``."""

    extra: frozenset[str] = frozenset()
    """Bare names or absolute paths the operator trusts (``--allow-exec-command``), with
    any arguments."""

    @classmethod
    def of(cls, extra: Iterable[str] = ()) -> ExecAllowlist:
        """The default list plus ``extra``; ValueError names an entry that is neither a
        bare name nor a normalized absolute path (a relative path means nothing here)."""
        entries = frozenset(str(e) for e in extra)
        for entry in sorted(entries):
            if not entry or "\0" in entry or ("/" in entry and not _normalized_absolute(entry)):
                raise ValueError(f"exec allowlist entry {_short(entry)}: give a bare command "
                                 "name or a normalized absolute path")
        return cls(entries)

    def describe(self) -> str:
        return ", ".join(sorted(set(EXEC_ALLOWLIST) | self.extra))


@dataclasses.dataclass(frozen=True)
class ExecSpec:
    """An exec plugin that passed :func:`check_exec`: only these fields are used."""

    command: str
    api_version: str
    args: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    env: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)
    provide_cluster_info: bool = False
    install_hint: str = ""


def check_exec(context: str, config: Mapping[str, Any],
               allowlist: ExecAllowlist | None) -> ExecSpec:
    """Refuse an exec plugin this process must not run, with one line naming the rule.

    The one check for every origin (``fedctl join`` before it stores a Secret, the
    control plane loading a joined cluster's Secret, ``fedctl run``'s own contexts, any
    client); it reads no file and runs nothing, so it may run on another machine than
    the plugin will. Never quotes an env value or an argument (they may be secrets)."""
    where = f"context {context!r}"
    if not isinstance(config, Mapping):
        raise ExecRefused(f"{where}: exec is not a mapping")
    api_version = config.get("apiVersion")
    if api_version not in EXEC_API_VERSIONS:
        raise ExecRefused(f"{where}: exec plugin apiVersion {_short(api_version)} is not one "
                          f"of {', '.join(EXEC_API_VERSIONS)}")
    command = config.get("command")
    if not command:
        raise ExecRefused(f"{where}: exec plugin has no command")
    if not isinstance(command, str) or "\0" in command or not command.isprintable():
        raise ExecRefused(f"{where}: exec command is not a printable string")
    if config.get("interactiveMode") == "Always":
        raise ExecRefused(f"{where}: exec plugin {command!r} needs a terminal "
                          "(interactiveMode: Always), which the control plane does not have")
    env = _checked_env(where, config.get("env"))
    args = _strings(where, "exec args", config.get("args"))
    _check_command(where, command, args, allowlist)
    return ExecSpec(command=command, api_version=str(api_version), args=args, env=env,
                    provide_cluster_info=config.get("provideClusterInfo") is True,
                    install_hint=_printable(str(config.get("installHint") or ""), 200))


def _checked_env(where: str, items: Any) -> tuple[tuple[str, str], ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ExecRefused(f"{where}: exec env is not a list of name/value pairs")
    pairs = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        value = item.get("value") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ExecRefused(f"{where}: exec env[{index}] has no valid name (letters, digits, "
                              "_; not starting with a digit)")
        if not isinstance(value, str) or "\0" in value:
            raise ExecRefused(f"{where}: exec env {name} has no string value")
        if env_denied(name):
            raise ExecRefused(f"{where}: exec env may not set {name} (the plugin runs with "
                              "the control plane's own; see EXEC_ENV_DENIED)")
        pairs.append((name, value))
    return tuple(pairs)


def env_denied(name: str) -> bool:
    """Whether a kubeconfig's exec env may not set ``name`` (:data:`EXEC_ENV_DENIED`)."""
    upper = name.upper()
    return upper in EXEC_ENV_DENIED or upper.startswith(EXEC_ENV_DENIED_PREFIXES)


def _strings(where: str, field: str, items: Any) -> tuple[str, ...]:
    if items is None:
        return ()
    if not isinstance(items, list) or not all(isinstance(a, str) and "\0" not in a
                                              for a in items):
        raise ExecRefused(f"{where}: {field} is not a list of strings")
    return tuple(items)


def _check_command(where: str, command: str, args: Sequence[str],
                   allowlist: ExecAllowlist | None) -> None:
    if "/" in command and not _normalized_absolute(command):
        raise ExecRefused(f"{where}: exec command {command!r} is a relative or unnormalized "
                          "path; give a bare name (found on the control plane's PATH) or an "
                          "exact absolute path")
    if allowlist is None or command in allowlist.extra:
        return
    if command not in EXEC_ALLOWLIST:
        raise ExecRefused(
            f"{where} uses exec plugin {command!r}, which is not on the allowlist "
            f"({allowlist.describe()}); the control plane would run it. If you trust it, "
            f"pass --allow-exec-command {command}")
    guard = EXEC_ALLOWLIST[command]
    if guard is not None and not guard.allows(args):
        before = f", after only {' '.join(sorted(guard.options))}" if guard.options else ""
        raise ExecRefused(
            f"{where}: exec plugin {command!r} may only run `{command} {guard}` (its "
            f"arguments must start with it{before}); to allow any arguments, pass "
            f"--allow-exec-command {command}")


def resolve_command(context: str, spec: ExecSpec, environ: Mapping[str, str] | None = None,
                    *, hint: bool = False) -> str:
    """The absolute path ``spec.command`` runs from: itself when absolute, else the first
    executable file of that name in this process's ``PATH`` (``environ``, default
    ``os.environ``; never the kubeconfig's env). Relative entries of PATH (``.``, empty)
    are skipped: the working directory is nobody's choice. ``hint`` adds the kubeconfig's
    installHint to the error (only for a user's own kubeconfig: from the hub it is
    someone else's text)."""
    command = spec.command
    if command.startswith("/"):
        candidates = [command]
    else:
        search = (os.environ if environ is None else environ).get("PATH", os.defpath)
        candidates = [os.path.join(d, command) for d in search.split(os.pathsep)
                      if os.path.isabs(d)]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    where = "is not an executable file" if command.startswith("/") else \
        "is not on the control plane's PATH"
    extra = f" ({spec.install_hint})" if hint and spec.install_hint else ""
    raise ExecRefused(f"context {context!r}: exec plugin {command!r} {where}{extra}")


def _normalized_absolute(path: str) -> bool:
    return path.startswith("/") and not path.startswith("//") and \
        os.path.normpath(path) == path


def _printable(text: str, limit: int) -> str:
    """One line of printable characters (no terminal escapes), at most ``limit`` long."""
    line = (text.strip().splitlines() or [""])[0]
    return "".join(c if c.isprintable() else "?" for c in line)[:limit]


def _short(value: Any) -> str:
    return repr(_printable(str(value), 80))
