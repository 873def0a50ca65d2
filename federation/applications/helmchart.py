"""vela-core's ``helmchart`` component: a Helm chart rendered by Helm, pure parts.

KubeVela's definition (``helmchart.cue``) hands its parameters to the ``vela/helm``
provider, which fetches the chart, merges the values, renders it with Helm's own engine
and returns the objects; the component's ``output`` is an audit ConfigMap
(``<release>-helm-release``) and each rendered object an ``outputs`` entry
(``helm-resource-<i>``). Here the same split, with the I/O outside this package:

- :func:`request` reads the component's properties, refuses by name what this control
  plane does not do (OCI sources, ``auth.secretRef``, ``valuesFrom`` Secrets, Helm release
  options that only mean something to a release Helm keeps in the cluster), and builds one
  evaluation request: a JSON value the controller answers off its event loop (the chart
  fetched through the outbound policy, ``helm template`` run in a worker process with a
  deadline and memory, CPU and output caps) and ``fedctl app dry-run`` answers in process;
- :func:`objects` turns the answer (Helm's manifest) into the component's objects the way
  KubeVela's provider parses its release manifest: tests left out unless asked for, the
  release namespace given to namespaced objects without one, CRDs then Namespaces first.
  Hooks (``helm.sh/hook``) are refused by name unless ``options.skipHooks``: Helm runs them
  in order around an install and waits for them, which a delivery of objects cannot do.

What comes out goes through the same checks as any other component's objects (the
Application's namespaces, the deny list, cluster-scoped kinds), in the renderer's callers.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from federation.applications import custom_status
from federation.applications import render as render_
from federation.applications.model import AppError, Component
from federation.untrusted import documents
from federation.untrusted.text import one_line

JSON = dict[str, Any]
Evaluate = Callable[[JSON], "JSON | None"]

TYPE = "helmchart"
REQUEST_KEY = "helm"
"""The request's one key: what tells the controller's runner a Helm render from a CUE
evaluation."""
OUTPUT_KEY = render_.OUTPUT_KEY
HOOK = "helm.sh/hook"
MAX_RENDER_SECONDS = 60.0
"""The longest ``options.timeout`` honoured: the operator's own render deadline
(``fedctl run --helm-timeout``) bounds it too."""
MANIFEST_LIMITS = documents.Limits(max_bytes=8 * 2**20, max_documents=2_000)
"""Helm's output read back: a chart rendering more is refused (the worker caps its output
file at the same size)."""

_PROPS = frozenset({"chart", "release", "values", "valuesFrom", "healthStatus", "options"})
_CHART = frozenset({"source", "repoURL", "version", "auth"})
_OPTIONS_HONOURED = {"includeCRDs": True, "skipTests": True, "skipHooks": False}
_RELEASE_ONLY = {"createNamespace": True, "maxHistory": 10, "atomic": False, "wait": False,
                 "force": False, "recreatePods": False, "cleanupOnFail": False}
"""Options of a Helm release kept in the cluster (install, upgrade, history): accepted at
KubeVela's defaults, refused by name otherwise (no release is kept here: the objects are the
Application's, delivered, tracked and deleted as any component's)."""
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?$")
_CLUSTER_SCOPED = frozenset({
    "CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding",
    "PersistentVolume", "StorageClass", "VolumeAttachment", "CSIDriver", "CSINode",
    "PriorityClass", "RuntimeClass", "IngressClass", "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration", "APIService", "FlowSchema",
    "PriorityLevelConfiguration", "Node", "ComponentStatus"})
"""Kinds KubeVela's provider leaves without a namespace (its static fallback list); any
other kind without one gets the release namespace."""
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def is_vela_core(template: str) -> bool:
    """Whether a ComponentDefinition's CUE template is vela-core's ``helmchart`` (or one
    like it): it imports the ``vela/helm`` provider, which is what this module does."""
    return re.search(r'^\s*(import\s*\(?)?\s*"vela/helm"', template, re.MULTILINE) is not None


def request(component: Component, namespace: str, where: str) -> JSON:
    """The evaluation request of one ``helmchart`` component (:class:`AppError` naming the
    field for anything refused)."""
    props = component.properties
    _check_known(props, _PROPS, where)
    chart = _chart(props.get("chart"), f"{where}.chart")
    release = _release(props.get("release"), component.name, namespace, f"{where}.release")
    values = props.get("values")
    if values is not None and not isinstance(values, dict):
        raise AppError(f"{where}.values: must be a map")
    if props.get("valuesFrom") is not None:
        _refuse_values_from(props["valuesFrom"], f"{where}.valuesFrom")
    if props.get("healthStatus") is not None:
        raise AppError(f"{where}.healthStatus: not supported here (the rendered objects' "
                       "health is judged by their kinds, as any component's)")
    options = _options(props.get("options"), f"{where}.options")
    return {REQUEST_KEY: {**chart, **release, "values": values or {}, **options}}


def _check_known(props: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(props) - known)
    if unknown:
        raise AppError(f"{where}.{unknown[0]}: not a parameter of {TYPE} "
                       f"({', '.join(sorted(known))})")


def _chart(value: Any, where: str) -> JSON:
    if not isinstance(value, dict):
        raise AppError(f"{where}: required, a map (source, repoURL, version)")
    _check_known(value, _CHART, where)
    if value.get("auth") is not None:
        raise AppError(f"{where}.auth: not supported: it names a Secret of credentials, and "
                       "the control plane reads no Secret an Application names (serve the "
                       "chart from a repository it may read without credentials)")
    source = value.get("source")
    if not isinstance(source, str) or not source:
        raise AppError(f"{where}.source: required, a string")
    repo = value.get("repoURL")
    if repo is not None and (not isinstance(repo, str) or not repo):
        raise AppError(f"{where}.repoURL: must be a URL")
    version = value.get("version", "latest")
    if not isinstance(version, str) or not version:
        raise AppError(f"{where}.version: must be a string")
    if source.startswith("oci://") or (repo or "").startswith("oci://"):
        raise AppError(f"{where}.source: OCI registries are not supported here (a chart "
                       "repository's index.yaml, or a direct .tgz URL, is)")
    if _is_url(source):
        if not _web(source):
            raise AppError(f"{where}.source: an http or https URL, a repository chart name "
                           "(with repoURL) or oci://")
        _check_url(source, f"{where}.source")
        return {"url": source}
    if repo is None:
        raise AppError(f"{where}.repoURL: required for a repository chart ({source!r})")
    if not _web(repo):
        raise AppError(f"{where}.repoURL: must be an http or https URL")
    _check_url(repo, f"{where}.repoURL")
    return {"repoURL": repo, "name": source, "version": version}


def _is_url(text: str) -> bool:
    return "://" in text


def _web(text: str) -> bool:
    return text.startswith(("https://", "http://"))


def _check_url(text: str, where: str) -> None:
    """No user name or password (sent as Basic credentials wherever the host points; a
    private repository's credentials are ``auth``'s, refused), at most 2,048 characters.
    Never quoted: the URL may hold a token."""
    if len(text) > 2048:
        raise AppError(f"{where}: longer than 2048 characters")
    authority = text.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in authority:
        raise AppError(f"{where}: a user name or password in the URL is refused (it would "
                       "be sent wherever the host points)")


def _release(value: Any, component: str, namespace: str, where: str) -> JSON:
    if value is None:
        return {"release": component, "namespace": namespace}
    if not isinstance(value, dict):
        raise AppError(f"{where}: must be a map (name, namespace)")
    _check_known(value, frozenset({"name", "namespace"}), where)
    name = value.get("name") or component
    target = value.get("namespace") or namespace
    for key, text, most in (("name", name, 53), ("namespace", target, 63)):
        if not isinstance(text, str) or len(text) > most or \
                not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", text):
            raise AppError(f"{where}.{key}: must be a DNS label of at most {most} characters")
    return {"release": name, "namespace": target}


def _refuse_values_from(value: Any, where: str) -> None:
    """``valuesFrom`` left in a component: read before the compile (:func:`with_values`),
    so here only when an override policy's patch brought it."""
    refs_of_values(value, "", "", where)
    raise AppError(f"{where}: read from the hub before the render; an override policy may "
                   "not add it (put the values in values)")


# -- valuesFrom: ConfigMaps of the Application's namespace on the hub --------------------------


@dataclasses.dataclass(frozen=True)
class ValuesRef:
    """One ``valuesFrom`` entry: a key of a ConfigMap in the Application's namespace."""

    name: str
    key: str
    optional: bool
    where: str


def values_refs(spec: Mapping[str, Any], namespace: str, where: str = "spec"
                ) -> dict[int, list[ValuesRef]]:
    """Per ``helmchart`` component index with ``valuesFrom``, what it reads (refused by
    path: a Secret, another namespace, another kind)."""
    components = spec.get("components") if isinstance(spec, Mapping) else None
    found: dict[int, list[ValuesRef]] = {}
    for index, component in enumerate(components if isinstance(components, list) else []):
        props = component.get("properties") if isinstance(component, dict) else None
        if component.get("type") == TYPE and isinstance(props, dict) and \
                props.get("valuesFrom") is not None:
            release = props.get("release")
            target = release.get("namespace") if isinstance(release, dict) else None
            found[index] = refs_of_values(
                props["valuesFrom"], namespace, str(target or namespace),
                f"{where}.components[{index}].properties.valuesFrom")
    return found


def refs_of_values(value: Any, namespace: str, release_namespace: str, where: str
                   ) -> list[ValuesRef]:
    if not isinstance(value, list):
        raise AppError(f"{where}: must be a list")
    return [_values_ref(entry, namespace, release_namespace, f"{where}[{index}]")
            for index, entry in enumerate(value)]


def _values_ref(entry: Any, namespace: str, release_namespace: str, where: str) -> ValuesRef:
    if not isinstance(entry, dict):
        raise AppError(f"{where}: must be a map (kind, name, key, optional)")
    _check_known(entry, frozenset({"kind", "name", "namespace", "key", "optional"}), where)
    if entry.get("kind") == "Secret":
        raise AppError(f"{where}: a Secret: the control plane reads no Secret an "
                       "Application names (a ConfigMap of its namespace, or values)")
    if entry.get("kind") != "ConfigMap":
        raise AppError(f"{where}.kind: ConfigMap (a Secret is refused here)")
    name, key = entry.get("name"), entry.get("key", "values.yaml")
    if not isinstance(name, str) or not name or not isinstance(key, str) or not key:
        raise AppError(f"{where}: name and key must be strings")
    given = entry.get("namespace")
    if given is not None and given != namespace:
        raise AppError(f"{where}.namespace: only the Application's own namespace "
                       f"({namespace}) is read on the hub")
    if given is None and release_namespace != namespace:
        raise AppError(f"{where}.namespace: KubeVela reads the release namespace "
                       f"({release_namespace}) by default; here only the Application's own "
                       f"({namespace}) is read: name it")
    optional = entry.get("optional", False)
    if not isinstance(optional, bool):
        raise AppError(f"{where}.optional: must be true or false")
    return ValuesRef(name, key, optional, where)


def with_values(spec: Mapping[str, Any], read: Mapping[int, Sequence[str | None]],
                refs: Mapping[int, Sequence[ValuesRef]], namespace: str) -> JSON:
    """``spec`` with each ``helmchart`` component's ``valuesFrom`` merged into its
    ``values`` (``read``: the text of each entry's key, None when the ConfigMap or the key
    is missing): in order, each deep-merged over the ones before (maps merged, lists and
    scalars replaced, null kept), the inline ``values`` last, as KubeVela merges them."""
    out = copy.deepcopy(dict(spec))
    for index, texts in read.items():
        props = out["components"][index]["properties"]
        merged: JSON = {}
        for ref, text in zip(refs[index], texts, strict=True):
            if text is None:
                if ref.optional:
                    continue
                raise AppError(f"{ref.where}: ConfigMap {namespace}/{ref.name} (key "
                               f"{ref.key!r}) not found on the hub")
            merged = _merge(merged, _values_text(text, ref, namespace))
        inline = props.get("values")
        if inline is not None and not isinstance(inline, dict):
            raise AppError(f"spec.components[{index}].properties.values: must be a map")
        props["values"] = _merge(merged, inline or {})
        del props["valuesFrom"]
    return out


def _values_text(text: str, ref: ValuesRef, namespace: str) -> JSON:
    try:
        docs = documents.yaml_documents(text)
    except documents.TextError as exc:
        raise AppError(f"{ref.where}: ConfigMap {namespace}/{ref.name} key {ref.key!r}: "
                       f"{exc}") from None
    found = docs[0] if len(docs) == 1 else docs if docs else None
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise AppError(f"{ref.where}: ConfigMap {namespace}/{ref.name} key {ref.key!r}: "
                       "must hold one YAML map")
    return found


def _merge(base: JSON, over: Mapping[str, Any]) -> JSON:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _options(value: Any, where: str) -> JSON:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise AppError(f"{where}: must be a map")
    _check_known(value, frozenset({*_OPTIONS_HONOURED, *_RELEASE_ONLY, "timeout", "cache"}),
                 where)
    found: JSON = {}
    for key, flag in _OPTIONS_HONOURED.items():
        given = value.get(key, flag)
        if not isinstance(given, bool):
            raise AppError(f"{where}.{key}: must be true or false")
        found[key] = given
    for key, default in _RELEASE_ONLY.items():
        if value.get(key, default) != default or type(value.get(key, default)) is not \
                type(default):
            raise AppError(f"{where}.{key}: not supported here: it manages a Helm release "
                           "kept in the cluster, and none is kept here (the chart's objects "
                           "are the Application's, delivered and deleted as any "
                           "component's)")
    if value.get("cache") is not None:
        raise AppError(f"{where}.cache: not supported here: charts are cached by their "
                       "digest, and a version that names no fixed chart is resolved again "
                       "when the Application changes")
    found["timeout"] = _seconds(value.get("timeout", "5m"), f"{where}.timeout")
    return found


def _seconds(value: Any, where: str) -> float:
    match = _DURATION.fullmatch(value) if isinstance(value, str) and value else None
    if match is None:
        raise AppError(f"{where}: a duration such as 30s, 5m or 1h")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise AppError(f"{where}: must be more than 0s")
    return float(min(total, MAX_RENDER_SECONDS))


# -- the answer -------------------------------------------------------------------------------


def render(component: Component, namespace: str, where: str, evaluate: Evaluate,
           app: str) -> list[JSON] | None:
    """The component's objects (the audit ConfigMap first), or None while its render is
    pending (``evaluate`` recorded the request)."""
    req = request(component, namespace, f"{where}.properties")
    answer = evaluate(req)
    if answer is None:
        return None
    return objects(answer, req[REQUEST_KEY], component, app, namespace, where)


class Retry(AppError):
    """A render that failed for a reason that may pass (the chart could not be fetched):
    the controller tries again after :attr:`retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def objects(answer: Mapping[str, Any], req: Mapping[str, Any], component: Component,
            app: str, namespace: str, where: str) -> list[JSON]:
    """The audit ConfigMap and the rendered objects of one answer."""
    if "error" in answer:
        message = f"{where}: chart {_chart_name(req)}: {one_line(str(answer['error']), 400)}"
        retry = answer.get("retry_after")
        if isinstance(retry, int | float):
            raise Retry(message, float(retry))
        raise AppError(message)
    manifest = answer.get("manifest")
    if not isinstance(manifest, str):
        raise AppError(f"{where}: chart {_chart_name(req)}: the render returned nothing")
    try:
        docs = documents.yaml_documents(manifest, MANIFEST_LIMITS)
    except documents.TextError as exc:
        raise AppError(f"{where}: chart {_chart_name(req)}: its output: {exc}") from None
    rendered = _ordered([_object(doc, req, f"{where} (chart {_chart_name(req)})")
                         for doc in docs if doc is not None])
    out = [_audit(req, component, app, namespace, len(rendered))]
    for index, obj in enumerate(rendered):
        key = f"helm-resource-{index}"
        out.append({**custom_status.label_output(obj, custom_status.AUXILIARY, key),
                    OUTPUT_KEY: key})
    return out


def _chart_name(req: Mapping[str, Any]) -> str:
    if "url" in req:
        return repr(req["url"])
    return f"{req['name']!r} {req['version']}"


def _object(doc: Any, req: Mapping[str, Any], where: str) -> JSON:
    if not isinstance(doc, dict):
        raise AppError(f"{where}: renders a document that is not an object")
    kind, meta = doc.get("kind"), doc.get("metadata")
    if not isinstance(kind, str) or not kind or not isinstance(doc.get("apiVersion"), str) \
            or not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise AppError(f"{where}: renders an object without apiVersion, kind or "
                       "metadata.name")
    annotations = meta.get("annotations") or {}
    hook = annotations.get(HOOK) if isinstance(annotations, dict) else None
    if hook is not None:
        raise AppError(f"{where}: {kind} {meta['name']!r} is a Helm hook ({HOOK}: "
                       f"{one_line(str(hook), 60)}): Helm runs hooks in order around an "
                       "install and waits for them, which this control plane does not do "
                       "(options.skipHooks: true leaves them out; tests are left out unless "
                       "options.skipTests is false)")
    body = _without_nulls(doc)
    if not body["metadata"].get("namespace") and kind not in _CLUSTER_SCOPED:
        body["metadata"]["namespace"] = req["namespace"]
    return dict(body)


def _without_nulls(value: Any) -> Any:
    """KubeVela's ``cleanResource``: nulls dropped, and maps left empty by that."""
    if isinstance(value, dict):
        found = {k: _without_nulls(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in found.items() if not (isinstance(v, dict) and not v)}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value if v is not None]
    return value


def _ordered(found: list[JSON]) -> list[JSON]:
    """CRDs, then Namespaces, then the rest, each in the chart's order (KubeVela's
    ``orderResources``)."""
    rank = {"CustomResourceDefinition": 0, "Namespace": 1}
    return sorted(found, key=lambda o: rank.get(str(o["kind"]), 2))


def _audit(req: Mapping[str, Any], component: Component, app: str, namespace: str,
           count: int) -> JSON:
    """KubeVela's ``output``: a ConfigMap recording the release."""
    source = str(req.get("url") or req.get("name"))
    labels = {"app.oam.dev/name": app, "app.oam.dev/namespace": namespace,
              "app.oam.dev/component": component.name}
    if _LABEL_VALUE.fullmatch(source):
        labels["helm.oam.dev/chart"] = source
    data = {"chartSource": source, "releaseName": req["release"],
            "releaseNamespace": req["namespace"], "resourceCount": str(count)}
    if "repoURL" in req:
        data["repoURL"] = str(req["repoURL"])
    props = component.properties.get("chart")
    if isinstance(props, dict) and isinstance(props.get("version"), str):
        data["chartVersion"] = props["version"]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{req['release']}-helm-release",
                         "namespace": req["namespace"], "labels": labels,
                         "annotations": {"helm.oam.dev/chart": source}},
            "data": data}
