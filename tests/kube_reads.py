"""``kubectl get ... -o json`` answered in process, for the e2e modules that opt in.

Why: on the test machine every ``kubectl`` call is a fresh Go process of ~57 MB (here the
Cloud SDK's dispatcher, which execs a versioned kubectl), about 0.1 s of CPU before it
sends a request; the e2e suite's polling waits make thousands of them on 2 cores shared
with the fleet's API servers and the control plane under test. The same GET from this
process costs a few milliseconds.

What is answered here: ``get`` with ``-o json`` of one resource type (kubectl's names:
plural, singular, kind, short names, optionally ``.group`` or ``.version.group``; or
``type/name``), zero or one object name, ``-n``/``--namespace``, ``-A``/
``--all-namespaces``, ``-l``/``--selector`` and ``--ignore-not-found``. Anything else
(several types, several names, other output formats, other flags) returns None and the
caller runs kubectl, so a test never gets an answer kubectl would not give. The answer
has kubectl's shape: the object, or a ``List`` whose items carry ``apiVersion`` and
``kind``; a missing object is kubectl's ``NotFound`` line and exit status 1.

The reads use the kubeconfig's own credentials (the fleet admin's client certificate)
and the API server's preferred version of each group, as kubectl does. Discovery is kept
per context and read again once when a name is not found in it (a CRD a test created).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import tempfile
import threading
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from federation.contexts import kubeconfig


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


@dataclass(frozen=True)
class GetArgs:
    resource: str
    name: str | None
    namespace: str | None
    all_namespaces: bool
    selector: str | None
    ignore_not_found: bool


_LETTERS = {"-n": "n", "--namespace": "n", "-l": "l", "--selector": "l", "-o": "o",
            "--output": "o"}


def parse_get(args: Sequence[str]) -> GetArgs | None:
    """The ``get`` arguments this reader answers, or None (kubectl must)."""
    if not args or args[0] != "get":
        return None
    positional: list[str] = []
    options: dict[str, str | bool] = {}
    items = list(args[1:])
    while items:
        item = items.pop(0)
        if item in ("-n", "--namespace", "-l", "--selector", "-o", "--output"):
            if not items:
                return None
            options[_LETTERS[item]] = items.pop(0)
        elif item.startswith(("--namespace=", "--selector=", "--output=")):
            key, _, value = item.partition("=")
            options[_LETTERS[key]] = value
        elif item in ("-ojson", "-o=json"):
            options["o"] = "json"
        elif item in ("-A", "--all-namespaces"):
            options["A"] = True
        elif item == "--ignore-not-found":
            options["ignore"] = True
        elif item.startswith("-"):
            return None
        else:
            positional.append(item)
    return _get_args(positional, options)


def _get_args(positional: list[str], options: dict[str, str | bool]) -> GetArgs | None:
    if options.get("o") != "json" or not positional or len(positional) > 2:
        return None
    resource, name = positional[0], positional[1] if len(positional) == 2 else None
    if "/" in resource:
        if name is not None:
            return None
        resource, _, name = resource.partition("/")
    if "," in resource or not resource or name == "":
        return None
    namespace, selector = options.get("n"), options.get("l")
    return GetArgs(resource, name, namespace if isinstance(namespace, str) else None,
                   bool(options.get("A")), selector if isinstance(selector, str) else None,
                   bool(options.get("ignore")))


class ContextReader:
    """GETs against one context's API server over one kept-alive HTTPS connection."""

    def __init__(self, context: kubeconfig.Context) -> None:
        self.context = context
        url = urllib.parse.urlsplit(context.server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.tls = self._tls(context)
        self.connection: http.client.HTTPSConnection | None = None
        self.types: list[ResourceType] | None = None
        self.default_namespace = context.namespace
        self.timeout = 30.0

    @staticmethod
    def _tls(context: kubeconfig.Context) -> ssl.SSLContext:
        tls = ssl.create_default_context(cadata=(context.ca_data or b"").decode() or None)
        if context.insecure_skip_tls_verify:
            tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
        if context.client_cert_data and context.client_key_data:
            with tempfile.TemporaryDirectory() as folder:
                cert, key = Path(folder, "cert"), Path(folder, "key")
                cert.write_bytes(context.client_cert_data)
                key.write_bytes(context.client_key_data)
                tls.load_cert_chain(cert, key)
        return tls

    def request(self, path: str) -> tuple[int, Any]:
        headers = {"Accept": "application/json"}
        if self.context.token:
            headers["Authorization"] = f"Bearer {self.context.token}"
        for attempt in (1, 2):  # a kept-alive connection the server closed: once more
            if self.connection is None:
                self.connection = http.client.HTTPSConnection(
                    self.host, self.port, context=self.tls, timeout=self.timeout)
            self.connection.timeout = self.timeout
            if self.connection.sock is not None:
                self.connection.sock.settimeout(self.timeout)
            try:
                self.connection.request("GET", path, headers=headers)
                answer = self.connection.getresponse()
                body = answer.read()
                return answer.status, json.loads(body) if body else None
            except (http.client.HTTPException, OSError) as exc:
                self.connection.close()
                self.connection = None
                if attempt == 2 or isinstance(exc, TimeoutError):
                    raise
        raise AssertionError("unreachable")

    def discover(self) -> list[ResourceType]:
        found: list[ResourceType] = []
        status, core = self.request("/api/v1")
        if status == 200:
            found += _types("", "v1", core)
        status, groups = self.request("/apis")
        for group in (groups or {}).get("groups") or [] if status == 200 else []:
            version = (group.get("preferredVersion") or {}).get("version")
            status, listing = self.request(f"/apis/{group['name']}/{version}")
            if status == 200:
                found += _types(group["name"], str(version), listing)
        return found

    def resolve(self, name: str) -> ResourceType | None:
        for fresh in (False, True):
            if self.types is None or fresh:
                self.types = self.discover()
            match = _match(self.types, name)
            if match is not None:
                return match
        return None


def _types(group: str, version: str, listing: Any) -> list[ResourceType]:
    return [ResourceType(group, version, r["name"], r["kind"], bool(r.get("namespaced")),
                         tuple(r.get("shortNames") or ()))
            for r in (listing or {}).get("resources") or [] if "/" not in r["name"]]


def _match(types: list[ResourceType], name: str) -> ResourceType | None:
    """kubectl's reading of a type name: ``name`` or ``name.group`` or
    ``name.version.group``, where ``name`` is the plural, singular or kind (any case)."""
    lowered = name.lower()
    for kind in types:
        names = {kind.plural, kind.kind.lower(), *kind.short_names}
        for known in names:
            if lowered in (known, f"{known}.{kind.group}",
                           f"{known}.{kind.version}.{kind.group}"):
                return kind
    return None


class KubeReads:
    """The in-process ``kubectl get``: one :class:`ContextReader` per context."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.readers: dict[str, ContextReader] = {}
        self.lock = threading.Lock()

    def get(self, context: str, args: Sequence[str], timeout: float = 30
            ) -> subprocess.CompletedProcess[str] | None:
        """kubectl's answer, or None when kubectl must give it. A server that does not
        answer within ``timeout`` raises :class:`subprocess.TimeoutExpired`, as the
        kubectl run would; one that refuses the connection is kubectl's exit status 1."""
        parsed = parse_get(args)
        if parsed is None:
            return None
        argv = ["kubectl", *args]
        with self.lock:
            reader = self.readers.get(context)
            if reader is None:
                reader = ContextReader(kubeconfig.load(self.path).context(context))
                self.readers[context] = reader
            reader.timeout = timeout
            try:
                kind = reader.resolve(parsed.resource)
                if kind is None:
                    return None  # kubectl says what it cannot find, in its own words
                return _answer(reader, kind, parsed, argv)
            except TimeoutError:
                raise subprocess.TimeoutExpired(argv, timeout) from None
            except (OSError, http.client.HTTPException) as exc:
                return subprocess.CompletedProcess(
                    argv, 1, "", f"Unable to connect to the server: {exc}\n")


def _answer(reader: ContextReader, kind: ResourceType, parsed: GetArgs,
            argv: list[str]) -> subprocess.CompletedProcess[str]:
    namespace = parsed.namespace or reader.default_namespace
    path = kind.base
    if kind.namespaced and not (parsed.all_namespaces and parsed.name is None):
        path += f"/namespaces/{urllib.parse.quote(namespace)}"
    path += f"/{kind.plural}"
    if parsed.name is not None:
        path += f"/{urllib.parse.quote(parsed.name)}"
    elif parsed.selector:
        path += "?" + urllib.parse.urlencode({"labelSelector": parsed.selector})
    status, body = reader.request(path)
    if status == 404 and parsed.name is not None:
        if parsed.ignore_not_found:
            return subprocess.CompletedProcess(argv, 0, "", "")
        return subprocess.CompletedProcess(
            argv, 1, "", f'Error from server (NotFound): {kind.qualified} "{parsed.name}" '
            "not found\n")
    if status != 200:
        message = (body or {}).get("message") if isinstance(body, dict) else None
        return subprocess.CompletedProcess(argv, 1, "", f"Error from server: {message}\n")
    if parsed.name is None:
        body = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": [_shown({"apiVersion": kind.api_version, "kind": kind.kind, **item})
                          for item in body.get("items") or []]}
    else:
        body = _shown(body)
    return subprocess.CompletedProcess(argv, 0, json.dumps(body), "")


def _shown(item: dict[str, Any]) -> dict[str, Any]:
    """The object as kubectl prints it: without ``metadata.managedFields`` (kubectl's
    ``--show-managed-fields=false``)."""
    meta = item.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        item["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return item
