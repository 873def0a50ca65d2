"""helmchart components, the pure half: parameters, refusals by name, Helm's manifest read
back, and the rendered objects held to the same checks as any component's."""

from __future__ import annotations

from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import definitions, helmchart, model, scope
from federation.placement import clusters as clusters_

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2")]
REPO = {"source": "demo", "repoURL": "https://charts.example.com", "version": "0.2.0"}
MANIFEST = """\
---
# Source: demo/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-cfg
data:
  greeting: "hi"
  empty: null
---
# Source: demo/templates/deploy.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
"""


class Helm:
    """An evaluate answering every Helm request with ``manifest`` (records the requests)."""

    def __init__(self, manifest: str = MANIFEST, error: str | None = None) -> None:
        self.manifest = manifest
        self.error = error
        self.requests: list[JSON] = []

    def __call__(self, request: JSON) -> JSON | None:
        self.requests.append(request)
        if self.error is not None:
            return {"error": self.error, "reason": "refused"}
        return {"manifest": self.manifest}


def spec(properties: JSON) -> JSON:
    return {"components": [{"name": "web", "type": "helmchart", "properties": properties}],
            "policies": [{"name": "two", "type": "topology",
                          "properties": {"clusters": ["member1", "member2"]}}]}


def compile_with(properties: JSON, helm: Helm | None = None,
                 grant: scope.Grant | None = None) -> compile_.Compiled:
    user = definitions.Rendering(definitions.Catalog(), definitions.AppInfo("shop"),
                                 helm or Helm())
    return compile_.compile_app(spec(properties), "shop", "shop", {}, FLEET, None, grant,
                                user)


def delivered(compiled: compile_.Compiled, cluster: str = "member1") -> list[JSON]:
    return [dict(o) for o in compiled.targets["deploy"].clusters[cluster]]


def test_a_repository_chart_is_rendered_and_delivered_to_every_cluster() -> None:
    helm = Helm()
    compiled = compile_with({"chart": REPO, "values": {"replicas": 3}}, helm)
    for cluster in ("member1", "member2"):
        found = {(o["kind"], o["metadata"]["name"]): o for o in delivered(compiled, cluster)}
        assert set(found) == {("ConfigMap", "web-helm-release"), ("ConfigMap", "web-cfg"),
                              ("Deployment", "web")}
        assert found[("Deployment", "web")]["metadata"]["namespace"] == "shop"
        assert found[("ConfigMap", "web-cfg")]["data"] == {"greeting": "hi"}  # null dropped
        audit = found[("ConfigMap", "web-helm-release")]
        assert audit["data"]["resourceCount"] == "2"
        assert audit["data"]["chartVersion"] == "0.2.0"
    assert helm.requests[0] == {"helm": {
        "repoURL": "https://charts.example.com", "name": "demo", "version": "0.2.0",
        "release": "web", "namespace": "shop", "values": {"replicas": 3},
        "includeCRDs": True, "skipTests": True, "skipHooks": False, "timeout": 60.0}}


def test_a_pending_render_is_a_placeholder_until_answered() -> None:
    requests: list[JSON] = []

    def pending(request: JSON) -> JSON | None:
        requests.append(request)
        return None

    user = definitions.Rendering(definitions.Catalog(), definitions.AppInfo("shop"), pending)
    compiled = compile_.compile_app(spec({"chart": REPO}), "shop", "shop", {}, FLEET, None,
                                    None, user)
    assert requests and definitions.pending_in(delivered(compiled))


def test_a_direct_archive_url_and_the_release_fields() -> None:
    helm = Helm()
    compile_with({"chart": {"source": "https://example.com/demo-1.0.0.tgz"},
                  "release": {"name": "shopfront"}, "options": {"timeout": "20s",
                                                                "includeCRDs": False}}, helm)
    req = helm.requests[0]["helm"]
    assert (req["url"], req["release"], req["timeout"], req["includeCRDs"]) == (
        "https://example.com/demo-1.0.0.tgz", "shopfront", 20.0, False)


@pytest.mark.parametrize(("properties", "words"), [
    ({"chart": {**REPO, "auth": {"secretRef": {"name": "creds"}}}},
     r"chart\.auth: not supported: it names a Secret"),
    ({"chart": {"source": "oci://ghcr.io/org/charts/app"}}, r"chart\.source: OCI"),
    ({"chart": {"source": "demo", "repoURL": "oci://ghcr.io/org"}}, r"OCI"),
    ({"chart": {"source": "demo"}}, r"chart\.repoURL: required"),
    ({"chart": {"source": "file:///etc/passwd"}}, r"chart\.source: an http or https URL"),
    ({"chart": {"source": "demo", "repoURL": "file:///var/charts"}},
     r"chart\.repoURL: must be an http or https URL"),
    ({"chart": REPO, "valuesFrom": [{"kind": "Secret", "name": "db"}]},
     r"valuesFrom\[0\]: a Secret: the control plane reads no Secret"),
    ({"chart": REPO, "valuesFrom": [{"kind": "ConfigMap", "name": "v"}]},
     r"valuesFrom: read from the hub before the render; an override policy may not add"),
    ({"chart": REPO, "healthStatus": []}, r"healthStatus: not supported"),
    ({"chart": {"source": "https://me:s3cret@charts.example.com/c.tgz"}},
     r"chart\.source: a user name or password in the URL is refused"),
    ({"chart": {**REPO, "repoURL": "https://tok@charts.example.com"}},
     r"chart\.repoURL: a user name or password"),
    ({"chart": {"source": "https://x.example/" + "a" * 2100}}, r"longer than 2048"),
    ({"chart": REPO, "options": {"wait": True}}, r"options\.wait: not supported here: it "
                                                  r"manages a Helm release"),
    ({"chart": REPO, "options": {"atomic": "yes"}}, r"options\.atomic: not supported"),
    ({"chart": REPO, "options": {"cache": {"ttl": "1h"}}}, r"options\.cache: not supported"),
    ({"chart": REPO, "options": {"timeout": "forever"}}, r"options\.timeout: a duration"),
    ({"chart": REPO, "options": {"skipHooks": "true"}}, r"options\.skipHooks: must be true"),
    ({"chart": REPO, "options": {"postRender": {}}}, r"options\.postRender: not a parameter"),
    ({"chart": REPO, "release": {"namespace": "Bad_NS"}},
     r"release\.namespace: must be a DNS label of at most 63"),
    ({"chart": REPO, "values": ["a"]}, r"values: must be a map"),
    ({"chart": REPO, "extra": 1}, r"\.extra: not a parameter of helmchart"),
    ({}, r"chart: required"),
])
def test_what_is_not_done_here_is_refused_by_name(properties: JSON, words: str) -> None:
    helm = Helm()
    with pytest.raises(model.AppError, match=words) as caught:
        compile_with(properties, helm)
    assert not helm.requests  # refused before anything is fetched or rendered
    assert "s3cret" not in str(caught.value) and "tok@" not in str(caught.value)


def test_the_release_options_at_kubevelas_defaults_are_accepted() -> None:
    compile_with({"chart": REPO, "options": {"createNamespace": True, "maxHistory": 10,
                                             "atomic": False, "wait": False, "force": False,
                                             "recreatePods": False, "cleanupOnFail": False,
                                             "timeout": "5m", "skipTests": True}})


def test_a_chart_rendering_into_another_namespace_is_refused() -> None:
    """The attack: a tenant's chart writes into a namespace the Application may not."""
    other = MANIFEST.replace("  name: web\n", "  name: web\n  namespace: kube-system\n")
    with pytest.raises(model.AppError, match="kube-system"):
        compile_with({"chart": REPO}, Helm(other))


def test_release_namespace_must_be_granted() -> None:
    with pytest.raises(model.AppError, match="bank"):
        compile_with({"chart": REPO, "release": {"namespace": "bank"}})
    compiled = compile_with({"chart": REPO, "release": {"namespace": "bank"}},
                            grant=scope.Grant("shop", frozenset({"bank"})))
    assert {o["metadata"]["namespace"] for o in delivered(compiled)} == {"bank"}


@pytest.mark.parametrize("kind", ["ClusterRoleBinding", "CustomResourceDefinition",
                                  "Namespace"])
def test_a_chart_rendering_a_cluster_scoped_kind_is_refused(kind: str) -> None:
    """The attack: a chart binding cluster-admin (or any cluster-scoped object)."""
    manifest = MANIFEST + (f"---\napiVersion: v1\nkind: {kind}\nmetadata:\n  name: pwn\n")
    with pytest.raises(model.AppError, match=kind):
        compile_with({"chart": REPO}, Helm(manifest))


def test_a_hook_is_refused_by_name_and_says_how_to_leave_it_out() -> None:
    manifest = MANIFEST + ("---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n"
                           "  annotations: {helm.sh/hook: pre-install}\nspec: {}\n")
    with pytest.raises(model.AppError, match=r"Job 'migrate' is a Helm hook \(helm.sh/hook: "
                                             r"pre-install\).*options\.skipHooks: true"):
        compile_with({"chart": REPO}, Helm(manifest))


def test_objects_are_ordered_crds_then_namespaces_then_the_chart_order() -> None:
    manifest = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n"
                "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n---\n"
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
                "metadata: {name: c}\n")
    component = model.Component(name="web", type="helmchart", properties={"chart": REPO})
    req = helmchart.request(component, "shop", "w")
    found = helmchart.objects({"manifest": manifest}, req["helm"], component, "shop", "shop",
                              "w")
    assert [o["kind"] for o in found] == ["ConfigMap", "CustomResourceDefinition", "Namespace",
                                          "ConfigMap"]
    assert "namespace" not in found[2]["metadata"]  # cluster-scoped: left without one


@pytest.mark.parametrize(("manifest", "words"), [
    ("- a list\n", "not an object"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "without apiVersion, kind or"),
    ("a: [unclosed\n", "its output"),
])
def test_malformed_helm_output_is_one_line(manifest: str, words: str) -> None:
    with pytest.raises(model.AppError, match=words) as caught:
        compile_with({"chart": REPO}, Helm(manifest))
    assert "\n" not in str(caught.value)


def test_a_render_error_is_the_applications_one_line_reason() -> None:
    with pytest.raises(model.AppError, match=r"spec\.components\[0\]: chart 'demo' 0\.2\.0: "
                                             r"execution error at \(demo/templates/x\)"):
        compile_with({"chart": REPO}, Helm(error="execution error at (demo/templates/x)"))


def test_without_a_renderer_helmchart_is_refused_not_skipped() -> None:
    with pytest.raises(model.AppError, match="'helmchart' needs Helm"):
        compile_.compile_app(spec({"chart": REPO}), "shop", "shop", {}, FLEET)


# -- valuesFrom ------------------------------------------------------------------------------


def values_spec(values_from: list[JSON], values: JSON | None = None,
                release: JSON | None = None) -> JSON:
    props: JSON = {"chart": REPO, "valuesFrom": values_from}
    if values is not None:
        props["values"] = values
    if release is not None:
        props["release"] = release
    return spec(props)


def test_values_from_configmaps_merge_in_order_under_the_inline_values() -> None:
    refs_: list[JSON] = [{"kind": "ConfigMap", "name": "base"},
                         {"kind": "ConfigMap", "name": "env", "key": "prod.yaml"},
                         {"kind": "ConfigMap", "name": "gone", "optional": True}]
    doc = values_spec(refs_, {"image": {"tag": "2"}})
    wanted = helmchart.values_refs(doc, "shop")
    assert [(r.name, r.key, r.optional) for r in wanted[0]] == [
        ("base", "values.yaml", False), ("env", "prod.yaml", False), ("gone", "values.yaml",
                                                                      True)]
    texts = ["image: {repo: web, tag: '1'}\nports: [80, 443]\nnote: base\n",
             "ports: [8080]\nnote: null\n", None]
    merged = helmchart.with_values(doc, {0: texts}, wanted, "shop")
    props = merged["components"][0]["properties"]
    assert "valuesFrom" not in props
    assert props["values"] == {"image": {"repo": "web", "tag": "2"}, "ports": [8080],
                               "note": None}
    helm = Helm()
    user = definitions.Rendering(definitions.Catalog(), definitions.AppInfo("shop"), helm)
    compile_.compile_app(merged, "shop", "shop", {}, FLEET, None, None, user)
    assert helm.requests[0]["helm"]["values"]["image"] == {"repo": "web", "tag": "2"}


@pytest.mark.parametrize(("entry", "release", "words"), [
    ({"kind": "Secret", "name": "db"}, None, r"a Secret: the control plane reads no Secret"),
    ({"kind": "ConfigMap", "name": "v", "namespace": "bank"}, None,
     r"namespace: only the Application's own namespace \(shop\)"),
    ({"kind": "ConfigMap", "name": "v"}, {"namespace": "bank"},
     r"KubeVela reads the release namespace \(bank\) by default"),
    ({"kind": "OCIRepository", "name": "v"}, None, r"kind: ConfigMap"),
    ({"kind": "ConfigMap", "name": "v", "optional": "yes"}, None, r"optional: must be"),
])
def test_values_from_reads_nothing_but_the_apps_own_configmaps(
        entry: JSON, release: JSON | None, words: str) -> None:
    """The attack: a tenant reading another namespace's (or any Secret's) content through
    the control plane's identity."""
    with pytest.raises(model.AppError, match=words):
        helmchart.values_refs(values_spec([entry], release=release), "shop")


@pytest.mark.parametrize(("text", "words"), [
    (None, r"ConfigMap shop/v \(key 'values.yaml'\) not found on the hub"),
    ("- a\n- list\n", "must hold one YAML map"),
    ("a: [unclosed\n", r"ConfigMap shop/v key 'values.yaml': "),
])
def test_a_missing_or_malformed_values_source_is_one_line(text: str | None,
                                                          words: str) -> None:
    doc = values_spec([{"kind": "ConfigMap", "name": "v"}])
    wanted = helmchart.values_refs(doc, "shop")
    with pytest.raises(model.AppError, match=words):
        helmchart.with_values(doc, {0: [text]}, wanted, "shop")


def test_vela_cores_own_helmchart_definition_on_the_hub_is_rendered_by_helm() -> None:
    """KubeVela installs its helmchart ComponentDefinition in vela-system; its template
    imports the vela/helm provider, which no CUE evaluator has: the built-in renders it."""
    template = 'import (\n\t"vela/helm"\n)\noutput: _\noutputs: _\nparameter: {...}\n'
    catalog, _ = definitions.catalog([{
        "apiVersion": "core.oam.dev/v1beta1", "kind": "ComponentDefinition",
        "metadata": {"name": "helmchart", "namespace": "vela-system"},
        "spec": {"schematic": {"cue": {"template": template}}}}])
    helm = Helm()
    user = definitions.Rendering(catalog, definitions.AppInfo("shop"), helm)
    compiled = compile_.compile_app(spec({"chart": REPO}), "shop", "shop", {}, FLEET, None,
                                    None, user)
    assert helm.requests and len(delivered(compiled)) == 3
    assert helmchart.is_vela_core(template)
    assert not helmchart.is_vela_core('import "vela/kube"\noutput: {}\n')
