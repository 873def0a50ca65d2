"""Helm charts for ``helmchart`` components: fetched, then rendered off the event loop.

A ``helmchart`` component names a chart by URL: a chart repository (``repoURL``, whose
``index.yaml`` maps the chart's name and version to an archive URL) or the archive itself.
The control plane fetches it, so the URL is a tenant's choice of destination, as a
notification URL is: every connection goes through the outbound policy
(:mod:`federation.contexts.egress`) of its own purpose, ``fedctl run --chart-allow``
(public addresses only unless the operator allows more). Redirects are followed by hand,
at most :attr:`ChartSettings.redirects`, each hop an http(s) URL dialled through the same
policy; each body is read up to a cap (the index, the archive) within a deadline; what a
tenant reads of a failure names no address (:func:`federation.contexts.egress.tenant_message`).

Archives are kept by the SHA-256 of their bytes in a bounded cache, and a repository
chart's exact version by (repository, name, version), so an Application's next render (new
values, a new revision) fetches nothing. ``latest`` is resolved against the index each
time the component's render is asked for (the applications controller's memo asks once per
content of the component).

:class:`Renderer` answers a ``helmchart`` request (:mod:`federation.applications.helmchart`):
the archive fetched here, ``helm template`` in the kit's sandbox workers
(:mod:`federation.local.helm_worker`); :func:`route` sends the controller's evaluation
requests to it or to the CUE workers.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses
import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from federation.applications import helmchart
from federation.contexts import egress
from federation.controllers.kit import sandbox
from federation.local import helm as helm_binary
from federation.untrusted import documents
from federation.untrusted.text import one_line

JSON = dict[str, Any]
Runner = Callable[[JSON], Awaitable[JSON]]
REFUSED = "refused"


WORK = sandbox.Work("federation.local.helm_worker", "helm render",
                    doing="rendering the Helm chart", during="rendering a Helm chart")


class ChartError(Exception):
    """A chart that cannot be had; the text is one line a tenant may read."""


@dataclasses.dataclass(frozen=True)
class ChartSettings:
    policy: egress.EgressPolicy = dataclasses.field(default_factory=egress.EgressPolicy)
    """Where charts may be fetched from (``--chart-allow``)."""
    helm: Path | None = None
    """The Helm binary (``--helm``, ``$FEDERATION_HELM``, PATH, the cache); None: every
    ``helmchart`` is refused with :data:`federation.local.helm.MISSING`."""
    max_index: int = 8 * 2**20
    """Bytes of a repository's index.yaml (a large public repository's is a few MiB)."""
    max_archive: int = 4 * 2**20
    """Bytes of a chart archive (charts are tens of KiB; a chart with its dependencies in
    ``charts/`` a few hundred)."""
    timeout: float = 30.0
    """Seconds for one fetch (connect, headers and body)."""
    redirects: int = 3
    cache_bytes: int = 64 * 2**20
    """Archive bytes kept in memory, by digest."""
    render_timeout: float = 30.0
    """Seconds one ``helm template`` may take (a component's ``options.timeout`` may ask
    for less); its worker is killed a few seconds after."""
    workers: int = 2
    memory: int = 1 << 30
    retry_after: float = 60.0
    """Seconds until a chart that could not be fetched is tried again (the Application is
    renderFailed meanwhile, and reconciled again then): a repository down, a chart not
    published yet."""


class Charts:
    """Fetches chart archives through the policy, with a digest-keyed cache."""

    def __init__(self, settings: ChartSettings) -> None:
        self.settings = settings
        self.fetched = 0
        """Bodies fetched (a test's measure of the cache)."""
        self._archives: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._pinned: dict[tuple[str, str, str], str] = {}

    async def archive(self, req: Mapping[str, Any]) -> bytes:
        """The archive a request names (:class:`ChartError`)."""
        if "url" in req:
            return self._keep(await self._get(str(req["url"]), self.settings.max_archive))
        key = (str(req["repoURL"]), str(req["name"]), str(req["version"]))
        pinned = self._pinned.get(key)
        if pinned is not None and pinned in self._archives:
            self._archives.move_to_end(pinned)
            return self._archives[pinned]
        url, expected = await self._resolve(*key)
        data = await self._get(url, self.settings.max_archive)
        digest = hashlib.sha256(data).hexdigest()
        if expected and digest != expected:
            raise ChartError(f"the archive of {key[1]!r} {key[2]} does not match the "
                             "index's digest")
        self._keep(data)
        if key[2] != "latest":
            self._pinned[key] = digest
        return data

    def _keep(self, data: bytes) -> bytes:
        digest = hashlib.sha256(data).hexdigest()
        self._archives[digest] = data
        self._archives.move_to_end(digest)
        while sum(map(len, self._archives.values())) > self.settings.cache_bytes and \
                len(self._archives) > 1:
            self._archives.popitem(last=False)
        return data

    async def _resolve(self, repo: str, name: str, version: str) -> tuple[str, str]:
        """The archive URL and its digest (or "") of ``name`` ``version`` in ``repo``."""
        index_url = f"{repo.rstrip('/')}/index.yaml"
        raw = await self._get(index_url, self.settings.max_index)
        try:
            index = documents.yaml_documents(documents.decode(
                raw, documents.Limits(max_bytes=self.settings.max_index)),
                documents.Limits(max_bytes=self.settings.max_index))
        except documents.TextError as exc:
            raise ChartError(f"the repository's index.yaml: {exc}") from None
        entry = pick(index[0] if len(index) == 1 else None, name, version)
        urls = entry.get("urls")
        if not isinstance(urls, list) or not urls or not isinstance(urls[0], str):
            raise ChartError(f"the repository's index.yaml has no URL for {name!r} "
                             f"{entry.get('version')}")
        target = urls[0] if urls[0].startswith(("http://", "https://")) else \
            f"{repo.rstrip('/')}/{urls[0]}"
        digest = entry.get("digest")
        return target, digest if isinstance(digest, str) and \
            re.fullmatch(r"[0-9a-f]{64}", digest) else ""

    async def _get(self, url: str, cap: int) -> bytes:
        """The body at ``url``, redirects followed by hand through the policy."""
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout)
        try:
            async with aiohttp.ClientSession(
                    connector=self.settings.policy.connector(force_close=True),
                    timeout=timeout, trust_env=False) as session:
                for _ in range(self.settings.redirects + 1):
                    _web(url)
                    async with session.get(url, allow_redirects=False) as answer:
                        if answer.status in (301, 302, 303, 307, 308):
                            url = urljoin(url, answer.headers.get("Location", ""))
                            continue
                        if answer.status != 200:
                            raise ChartError(f"{_shown(url)}: HTTP {answer.status}")
                        self.fetched += 1
                        return await _body(answer, cap, url)
                raise ChartError(f"{_shown(url)}: more than {self.settings.redirects} "
                                 "redirects")
        except ChartError:
            raise
        except TimeoutError:
            raise ChartError(f"{_shown(url)}: {egress.UNREACHABLE}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ChartError(f"{_shown(url)}: {egress.tenant_message(exc)}") from None


async def _body(answer: aiohttp.ClientResponse, cap: int, url: str) -> bytes:
    data = bytearray()
    async for chunk in answer.content.iter_chunked(64 * 1024):
        data += chunk
        if len(data) > cap:
            raise ChartError(f"{_shown(url)}: larger than the limit of {cap} bytes")
    return bytes(data)


def _web(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ChartError(f"{_shown(url)}: not an http or https URL")


def _shown(url: str) -> str:
    """The URL a tenant wrote or was sent to, without credentials or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return one_line(f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}"
                    f"{parts.path}", 200)


_SEMVER = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$")


def pick(index: Any, name: str, version: str) -> Mapping[str, Any]:
    """The index entry of ``name`` at ``version``: the exact version, or for ``latest``
    the highest version without a pre-release part (Helm's ``*``)."""
    entries = index.get("entries") if isinstance(index, dict) else None
    if not isinstance(entries, dict):
        raise ChartError("the repository's index.yaml has no entries")
    found = entries.get(name)
    if not isinstance(found, list) or not found:
        raise ChartError(f"no chart {name!r} in the repository")
    versions = [e for e in found if isinstance(e, dict) and isinstance(e.get("version"), str)]
    if version != "latest":
        for entry in versions:
            if entry["version"] == version:
                return entry
        raise ChartError(f"no version {one_line(version, 60)!r} of chart {name!r} in the "
                         "repository (an exact version, or latest)")
    stable = [(key, e) for e in versions if (key := _release_key(e["version"])) is not None]
    if not stable:
        raise ChartError(f"no released version of chart {name!r} in the repository")
    return max(stable, key=lambda pair: pair[0])[1]


def _release_key(text: str) -> tuple[int, int, int] | None:
    match = _SEMVER.fullmatch(text)
    if match is None or match.group(4):
        return None
    return (int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0))


class Renderer:
    """Answers ``helmchart`` requests: the chart fetched, then rendered by ``ask`` (the
    sandbox's, or in process)."""

    def __init__(self, settings: ChartSettings, ask: Runner) -> None:
        self.settings = settings
        self.charts = Charts(settings)
        self.ask = ask

    async def __call__(self, request: JSON) -> JSON:
        req = request[helmchart.REQUEST_KEY]
        if self.settings.helm is None:
            return {"error": helm_binary.MISSING, "reason": REFUSED}
        try:
            archive = await self.charts.archive(req)
        except ChartError as exc:
            return {"error": f"fetching the chart: {exc}", "reason": REFUSED,
                    "retry_after": self.settings.retry_after}
        return await self.ask({
            "helm": str(self.settings.helm), "archive": base64.b64encode(archive).decode(),
            "release": req["release"], "namespace": req["namespace"],
            "values": req["values"], "includeCRDs": req["includeCRDs"],
            "skipTests": req["skipTests"], "skipHooks": req["skipHooks"],
            "timeout": min(float(req["timeout"]), self.settings.render_timeout),
            "memory": self.settings.memory})


def route(cue: Runner, helm: Runner) -> Runner:
    """One runner for the controller's evaluations: Helm renders to ``helm``, CUE
    evaluations to ``cue``."""
    async def run(request: JSON) -> JSON:
        return await (helm if helmchart.REQUEST_KEY in request else cue)(request)
    return run


async def inline_render(request: JSON) -> JSON:
    """``helm template`` in this process's child (``fedctl app dry-run``, unit tests)."""
    from federation.local import helm_worker
    return await asyncio.to_thread(helm_worker.answer, request)
