"""The propagation deny list: rules, configuration, and every place it is enforced."""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any

import hypothesis
import hypothesis.strategies
import pytest
from click.testing import CliRunner

from federation.commands import join, run
from federation.contexts import client as kube
from federation.controllers import policy_validation, propagation, setup
from federation.controllers.kit import copies, kinds, plan
from federation.controllers.propagation import load_policy, render
from federation.hub import api, deny
from federation.placement import clusters as clusters_
from federation.placement import decision as decision_
from federation.placement import loader
from federation.runtime.reconcile import Request
from tests.unit.clients import UnservedFleet, UnservedWrites
from tests.unit.controllers.fakes import FakeContext

DEFAULT = deny.DenyList()
DEFAULT_AGENT_WHY = next(r.why for r in deny.DEFAULT_RULES if r.group == deny.ANY_GROUP)


def secret(namespace: str, name: str = "s", type_: str = "Opaque") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": name, "namespace": namespace}, "data": {}}


def test_rules_parse_print_and_compare() -> None:
    """GROUP/KIND[:namespace=NS][:type=TYPE] round-trips; core is the empty group."""
    rule = deny.Rule.parse("core/Secret:namespace=kube-system")
    assert (rule.group, rule.kind, rule.namespace, rule.type) == \
        ("", "Secret", "kube-system", None)
    assert str(rule) == "core/Secret:namespace=kube-system"
    typed = deny.Rule.parse("core/Secret:type=kubernetes.io/service-account-token")
    assert typed.type == "kubernetes.io/service-account-token" and not typed.whole_kind
    assert deny.Rule.parse("apps/*").covers_kind("apps", "Deployment")
    assert deny.Rule.parse("core/Event", why="x") == deny.Rule.parse("core/Event")


@pytest.mark.parametrize("text", ["Secret", "/Secret", "core/", "core/Secret:ns=x",
                                  "core/Secret:namespace=", "core/Secret:type=a:type=b",
                                  "core /Secret", "*/*", "*/Secret:namespace=x",
                                  "*/*:type=Opaque"])
def test_malformed_rules_are_refused_naming_the_rule(text: str) -> None:
    """A rule we cannot read is an error quoting it, never a rule that matches nothing."""
    with pytest.raises(deny.DenyError, match="deny rule"):
        deny.Rule.parse(text)


@pytest.mark.parametrize(("group", "kind"), [
    ("policy.federation.io", "PropagationPolicy"), ("policy.federation.io", "OverridePolicy"),
    ("work.federation.io", "ResourceBinding"), ("work.federation.io", "ClusterResourceBinding"),
    ("cluster.federation.io", "MemberCluster"), ("policy.karmada.io", "PropagationPolicy"),
    ("", "Event"), ("events.k8s.io", "Event"), ("coordination.k8s.io", "Lease"),
    ("", "Endpoints"), ("discovery.k8s.io", "EndpointSlice"),
    ("authentication.k8s.io", "TokenReview"), ("authorization.k8s.io", "SubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"), ("", "Binding"),
    ("", "ComponentStatus"), ("", "Node"), ("certificates.k8s.io", "CertificateSigningRequest"),
    ("apiregistration.k8s.io", "APIService"),
    ("core.oam.dev", "Application"), ("core.oam.dev", "Policy"),
    ("core.oam.dev", "ResourceTracker"), ("core.oam.dev", "ApplicationRevision"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("policy", "PodSecurityPolicy"), ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
])
def test_default_list_denies_these_kinds_whole(group: str, kind: str) -> None:
    """Our API, a cluster's records about itself, review kinds, plumbing, what governs a
    whole member (admission, PodSecurityPolicy, RBAC) and KubeVela's API: never followed."""
    assert DEFAULT.kind_rule(group, kind) is not None


@pytest.mark.parametrize(("group", "kind"), [
    ("", "ConfigMap"), ("apps", "Deployment"), ("", "Secret"), ("", "Service"),
    ("policy", "PodDisruptionBudget"), ("apiextensions.k8s.io", "CustomResourceDefinition"),
])
def test_ordinary_kinds_are_followed(group: str, kind: str) -> None:
    """Workloads, config and (most) Secrets are what propagation is for."""
    assert DEFAULT.kind_rule(group, kind) is None


def test_credentials_are_denied_object_by_object() -> None:
    """Secrets of kube-system, of our namespace and service-account tokens anywhere are
    denied; an ordinary Secret of a team namespace is not."""
    assert str(DEFAULT.object_rule(secret("kube-system"))) == \
        "core/Secret:namespace=kube-system"
    assert str(DEFAULT.object_rule(secret(join.NAMESPACE))) == \
        f"core/Secret:namespace={join.NAMESPACE}"
    token = secret("shop", type_="kubernetes.io/service-account-token")
    assert str(DEFAULT.object_rule(token)) == \
        "core/Secret:type=kubernetes.io/service-account-token"
    assert DEFAULT.object_rule(secret("shop")) is None
    assert DEFAULT.object_rule({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "c", "namespace": "kube-system"}}) is None


@pytest.mark.parametrize("obj", [
    {"apiVersion": "apps/v1", "kind": "Deployment"}, {"apiVersion": "v1", "kind": "Secret"},
    {"apiVersion": "v1", "kind": "ConfigMap"}, {"apiVersion": "v1", "kind": "ServiceAccount"},
    {"apiVersion": "example.io/v1", "kind": "Widget"}])
async def test_nothing_reaches_the_pull_agents_namespace(obj: dict[str, Any]) -> None:
    """The attack: a tenant whose hub namespace is called federation-agent propagates a
    Deployment there; in a pull member it would run as the agent's ServiceAccount and read
    the agent's certificate Secret. Every kind in that namespace is denied, and the writer
    refuses it before any request; a same-named object elsewhere is not."""
    from federation.deploy import manifests

    assert deny.AGENT_NAMESPACE == manifests.AGENT_NAMESPACE
    inside = {**obj, "metadata": {"name": "x", "namespace": deny.AGENT_NAMESPACE}}
    assert str(DEFAULT.object_rule(inside)) == f"*/*:namespace={deny.AGENT_NAMESPACE}"
    assert DEFAULT.object_rule({**obj, "metadata": {"name": "x", "namespace": "shop"}}) is None
    group, kind = deny.group_kind_of(obj)
    assert DEFAULT.kind_rule(group, kind) is None  # still followed elsewhere
    writer = propagation.Writer(FakeMC(), "hub", DEFAULT)
    with pytest.raises(deny.Denied, match=r"^refused: .* in member1 is on the propagation"):
        await writer.create("member1", inside)
    policy = {"kind": "PropagationPolicy", "metadata": {"namespace": deny.AGENT_NAMESPACE},
              "spec": {"resourceSelectors": [{"apiVersion": obj["apiVersion"],
                                              "kind": obj["kind"]}]}}
    assert f"every kind in namespace {deny.AGENT_NAMESPACE}: {DEFAULT_AGENT_WHY} " \
        f"[*/*:namespace={deny.AGENT_NAMESPACE}]" in DEFAULT.policy_denials(policy)
    elsewhere = {**policy, "metadata": {"namespace": "shop"}}
    assert not any("every kind" in line for line in DEFAULT.policy_denials(elsewhere))


def test_our_namespace_is_where_join_keeps_kubeconfigs() -> None:
    """The deny list's namespace is the one `fedctl join` writes Secrets into."""
    assert deny.OUR_NAMESPACE == join.NAMESPACE


def test_operators_extend_and_remove_only_explicitly() -> None:
    """RULE adds, -RULE removes a rule that must exist (a typo is an error)."""
    changed = deny.DenyList.configured(["apps/Deployment,-core/Endpoints", "core/Secret:type=x"])
    assert changed.kind_rule("apps", "Deployment") is not None
    assert changed.kind_rule("", "Endpoints") is None
    assert changed.object_rule(secret("shop", type_="x")) is not None
    assert deny.DenyList.configured([]) == DEFAULT
    with pytest.raises(deny.DenyError, match="'core/Endpoint' is not in the deny list"):
        deny.DenyList.configured(["-core/Endpoint"])


def test_run_refuses_a_bad_deny_flag_in_one_line() -> None:
    """`fedctl run --propagation-deny` with a bad rule: exit 1, one line naming the flag."""
    result = CliRunner().invoke(run.run, ["--propagation-deny", "Secret"])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith("error: --propagation-deny: deny rule 'Secret'")


def cluster_policy(*selectors: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "ClusterPropagationPolicy",
            "metadata": {"name": "all", "uid": "p-uid"},
            "spec": {"resourceSelectors": list(selectors), "placement": {}}}


def test_policy_denials_name_each_rule() -> None:
    """Selecting Secrets cluster-wide names the credentials rules; bindings and Events are
    named too; a team's namespaced policy on Secrets only meets the token rules."""
    found = DEFAULT.policy_denials(cluster_policy(
        {"apiVersion": "v1", "kind": "Secret"},
        {"apiVersion": "work.federation.io/v1alpha1", "kind": "ResourceBinding"},
        {"apiVersion": "v1", "kind": "Event"}))
    text = "\n".join(found)
    for rule in ("core/Secret:namespace=kube-system", f"core/Secret:namespace={join.NAMESPACE}",
                 "core/Secret:type=kubernetes.io/service-account-token",
                 "work.federation.io/*", "core/Event"):
        assert f"[{rule}]" in text
    team = {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret"}]}}
    assert all("type=" in line for line in DEFAULT.policy_denials(team))
    scoped = cluster_policy({"apiVersion": "v1", "kind": "Secret", "namespace": "shop"})
    assert all("namespace=" not in line for line in DEFAULT.policy_denials(scoped))
    assert DEFAULT.policy_denials(cluster_policy({"apiVersion": "v1", "kind": "ConfigMap"})) \
        == []


def test_joined_clusters_credential_namespaces_are_denied() -> None:
    """A MemberCluster pointing at a Secret elsewhere denies Secrets of that namespace."""
    members: list[dict[str, Any]] = [{"metadata": {"name": "m"}, "spec": {"kubeconfigSecretRef": {
        "name": "k", "namespace": "creds"}}}, {"metadata": {"name": "static"}, "spec": {}}]
    rules = DEFAULT.with_rules(deny.credential_rules(members))
    assert str(rules.object_rule(secret("creds"))) == "core/Secret:namespace=creds"


# -- enforcement -----------------------------------------------------------------------------


class FakeDiscovery:
    def __init__(self) -> None:
        self.resolved: list[tuple[str, str]] = []

    async def resolve(self, api_version: str, kind: str) -> kube.Resource:
        self.resolved.append((api_version, kind))
        group = deny.group_of(api_version)
        return kube.Resource(group, api_version.rpartition("/")[2], kind.lower() + "s", kind)


def tracker() -> tuple[kinds.KindTracker, FakeDiscovery]:
    discovery = FakeDiscovery()
    hub = types.SimpleNamespace(discovery=discovery, cache=object(), name="hub")
    fake_clusters: Any = types.SimpleNamespace(hub=hub, members=[])
    return kinds.KindTracker(fake_clusters, lambda _, __: None), discovery


@pytest.mark.parametrize(("api_version", "kind"), [
    ("v1", "Event"), ("events.k8s.io/v1", "Event"),
    ("work.federation.io/v1alpha1", "ResourceBinding"),
    ("policy.federation.io/v1alpha1", "PropagationPolicy"),
    ("authentication.k8s.io/v1", "TokenReview"),
    ("core.oam.dev/v1beta1", "Application"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
])
async def test_denied_kinds_are_never_followed(api_version: str, kind: str) -> None:
    """No discovery call, no informer: the kind tracker refuses a denied kind."""
    found, discovery = tracker()
    with pytest.raises(deny.Denied, match="propagation deny list"):
        await found.track(api_version, kind)
    assert discovery.resolved == [] and found.hub_resources == {}


class FakeWriter(UnservedWrites):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.cluster_scoped: set[str] = set()
        """Kinds this member serves cluster-scoped."""

    async def resource(self, obj: Mapping[str, Any]) -> kube.Resource:
        kind = str(obj["kind"])
        return kube.Resource("example.io", "v1", kind.lower() + "s", kind,
                             namespaced=kind not in self.cluster_scoped)

    async def create(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("create", obj["metadata"]["name"]))
        return obj

    update = apply = create


class FakeMC(UnservedFleet):
    def __init__(self, lists: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.writer = FakeWriter()
        self.lists = lists or {}

    def cluster(self, name: str) -> UnservedWrites:
        return self.writer

    def items(self, resource: kube.Resource, namespace: str | None,
              clusters: Sequence[str] | None) -> dict[str, list[dict[str, Any]]]:
        return {"hub": list(self.lists.get(resource.kind, []))}


async def test_the_writer_refuses_denied_objects_in_members() -> None:
    """Defence in depth: a member write of a kube-system Secret is refused before any
    request; the hub (bindings, events) is not subject to the list."""
    mc = FakeMC()
    writer = propagation.Writer(mc, "hub", DEFAULT)
    for verb in (writer.create, writer.update, writer.apply):
        with pytest.raises(deny.Denied, match=r"^refused: Secret kube-system/s in member1"):
            await verb("member1", secret("kube-system"))
    binding = {"apiVersion": "work.federation.io/v1alpha1", "kind": "ResourceBinding",
               "metadata": {"name": "b", "namespace": "shop"}}
    await writer.create("hub", binding)
    await writer.create("member1", secret("shop"))
    assert mc.writer.calls == [("create", "b"), ("create", "s")]


async def test_the_writer_refuses_secrets_where_joined_clusters_keep_kubeconfigs() -> None:
    """Defence in depth for the rule the planners apply: a Secret in a namespace a
    MemberCluster's kubeconfigSecretRef points into is refused by the writer too."""
    member = {"apiVersion": "cluster.federation.io/v1alpha1", "kind": "MemberCluster",
              "metadata": {"name": "edge"},
              "spec": {"kubeconfigSecretRef": {"namespace": "fleet-creds", "name": "edge"}}}
    mc = FakeMC({"MemberCluster": [member]})
    writer = propagation.Writer(mc, "hub", DEFAULT)
    with pytest.raises(deny.Denied, match=r"^refused: Secret fleet-creds/s in member1"):
        await writer.create("member1", secret("fleet-creds"))
    await writer.create("member1", secret("shop"))
    assert mc.writer.calls == [("create", "s")]


async def test_the_writer_never_turns_a_namespaced_object_cluster_scoped() -> None:
    """A kind the hub serves namespaced (a namespace owner's template, an Application's
    object) that a member serves cluster-scoped: refused before any request there."""
    mc = FakeMC()
    mc.writer.cluster_scoped.add("Widget")
    writer = propagation.Writer(mc, "hub", DEFAULT)
    widget = {"apiVersion": "example.io/v1", "kind": "Widget",
              "metadata": {"name": "w", "namespace": "shop"}}
    for verb in (writer.create, writer.update, writer.apply):
        with pytest.raises(deny.Denied, match=r"^refused: Widget.example.io shop/w in "
                                              r"member1: Widget is cluster-scoped there"):
            await verb("member1", widget)
    assert mc.writer.calls == []
    cluster_wide = {**widget, "metadata": {"name": "w"}}  # a cluster-scoped template's
    await writer.create("member1", cluster_wide)
    mc.writer.cluster_scoped.clear()
    await writer.create("member1", widget)
    assert mc.writer.calls == [("create", "w"), ("create", "w")]


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    async def emit(self, obj: Mapping[str, Any], kind: str, reason: str, message: str
                   ) -> None:
        self.events.append((str(obj["metadata"]["name"]), kind, reason, message))

    def forget(self, obj: Mapping[str, Any]) -> None:
        return None


def reconciler(lists: dict[str, list[dict[str, Any]]]) -> FakeContext:
    return FakeContext(lists)


def build_for(template: dict[str, Any]) -> propagation.Build:
    return propagation.Build(template=template, resource=kube.Resource(
        "", "v1", "secrets", "Secret"), hub="hub")


@pytest.mark.parametrize(("namespace", "members"), [
    ("kube-system", []), (join.NAMESPACE, []),
    ("creds", [{"metadata": {"name": "m"},
                "spec": {"kubeconfigSecretRef": {"name": "k", "namespace": "creds"}}}]),
])
async def test_a_selected_denied_secret_is_skipped(namespace: str,
                                                   members: list[dict[str, Any]]) -> None:
    """A Secret selector matching a credentials Secret: no policy, the rule remembered."""
    r = reconciler({"ClusterPropagationPolicy": [cluster_policy(
        {"apiVersion": "v1", "kind": "Secret"})], "MemberCluster": members})
    build = build_for(secret(namespace))
    await load_policy.load_policy(r, build)
    assert build.policy is None and build.denied is not None
    assert build.denied[1].namespace == namespace
    allowed = build_for(secret("shop"))
    await load_policy.load_policy(r, allowed)
    assert allowed.policy is not None and allowed.denied is None


async def test_the_skip_is_reported_on_the_policy_once_per_rule() -> None:
    """A Warning event on the policy names the object and the rule; a second object the
    same rule skips adds no event."""
    recorder = FakeRecorder()
    r = propagation.Reconciler.__new__(propagation.Reconciler)
    r.recorder = recorder
    r._denials_reported = set()
    rule = deny.Rule.parse("core/Secret:namespace=kube-system")
    for name in ("a", "b"):
        build = build_for(secret("kube-system", name))
        await r._report_denied(build, cluster_policy(), rule)
    assert len(recorder.events) == 1
    policy, kind, reason, message = recorder.events[0]
    assert (policy, kind, reason) == ("all", "Warning", "Denied")
    assert "Secret kube-system/a is not propagated" in message
    assert "core/Secret:namespace=kube-system" in message


def override_doc(patches: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "evil", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                     "overrideRules": [{"overriders": {"plaintext": patches}}]}}


async def test_render_stops_a_template_selected_by_a_refused_override() -> None:
    """The template is not rendered at all (not rendered without the override):
    Applied=False with reason OverrideRefused naming the policy, rule and path."""
    r = reconciler({"OverridePolicy": [override_doc(
        [{"path": "/metadata/namespace", "operator": "replace", "value": "kube-system"}])]})
    template = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "shop", "uid": "t"}, "data": {}}
    build = propagation.Build(template=template, resource=kube.CONFIGMAPS, hub="hub")
    build.policy = loader.parse_policy({
        "apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}]}}, "p")
    build.clusters = [clusters_.Cluster(name="member1")]
    build.decision = decision_.Decision(replicas=0, clusters={"member1": 0})
    with pytest.raises(propagation.Problem) as caught:
        await render.render(r, build)
    assert (caught.value.condition, caught.value.reason) == ("Applied", "OverrideRefused")
    assert str(caught.value) == (
        "OverridePolicy shop/evil is refused: overrideRules[0].overriders.plaintext[0]: "
        "path /metadata/namespace may not be overridden")
    assert build.desired == {}


def test_copy_vertices_carry_the_template_identity() -> None:
    """plan_copies' vertices expect the template's identity (what the executor checks)."""
    template = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "shop"}}
    expect = plan.Identity.of(template)
    vertex = copies.copy_vertex("m1", dict(template), None, False, expect=expect)
    assert vertex is not None and vertex.expect == expect


class FakeStatusWriter(UnservedWrites):
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch_status(self, resource: kube.Resource, name: str, patch: dict[str, Any], *,
                           namespace: str | None = None,
                           resource_version: str | None = None) -> dict[str, Any]:
        self.patches.append(patch)
        return patch


class PolicyMC(FakeMC):
    def __init__(self, doc: dict[str, Any]) -> None:
        super().__init__()
        self.doc = doc
        self.status = FakeStatusWriter()

    async def get(self, resource: kube.Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False, copy: bool = True
                  ) -> dict[str, Any]:
        return self.doc

    def cluster(self, name: str) -> UnservedWrites:
        return self.status


async def test_a_policy_selecting_denied_kinds_gets_a_denied_condition_and_event() -> None:
    """Valid stays True (the rest of what it selects propagates); Denied=True names the
    rules; a Warning event says the same; an unchanged status is not rewritten."""
    doc = cluster_policy({"apiVersion": "v1", "kind": "Secret"},
                         {"apiVersion": "v1", "kind": "Event"})
    mc, recorder = PolicyMC(doc), FakeRecorder()
    reconciler = policy_validation.Reconciler(mc, "hub", recorder)
    request = Request("hub", "ClusterPropagationPolicy.policy.federation.io", "", "all")
    await reconciler.reconcile(request)
    conditions = {c["type"]: c for c in mc.status.patches[0]["status"]["conditions"]}
    assert conditions["Valid"]["status"] == "True"
    denied = conditions["Denied"]
    assert (denied["status"], denied["reason"]) == ("True", "DenyList")
    assert "[core/Event]" in denied["message"]
    assert "[core/Secret:namespace=kube-system]" in denied["message"]
    assert [(e[1], e[2]) for e in recorder.events] == [("Warning", "Denied")]
    doc["status"] = mc.status.patches[0]["status"]
    await reconciler.reconcile(request)
    assert len(mc.status.patches) == 1


async def test_a_namespaced_policy_selecting_applications_is_denied() -> None:
    """The attack of finding 9: a namespaced PropagationPolicy selecting Applications made
    the control plane create the cluster-scoped applications.core.oam.dev CRD in member1.
    Now the policy is Denied naming core.oam.dev, and the kind is never followed (no
    informer, no discovery, so no copy and no CRD can follow)."""
    doc = {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
           "metadata": {"name": "apps", "namespace": "team-a", "uid": "p"},
           "spec": {"resourceSelectors": [{"apiVersion": "core.oam.dev/v1beta1",
                                           "kind": "Application"}], "placement": {}}}
    mc, recorder = PolicyMC(doc), FakeRecorder()
    reconciler = policy_validation.Reconciler(mc, "hub", recorder)
    request = Request("hub", "PropagationPolicy.policy.federation.io", "team-a", "apps")
    await reconciler.reconcile(request)
    conditions = {c["type"]: c for c in mc.status.patches[0]["status"]["conditions"]}
    assert conditions["Denied"]["status"] == "True"
    assert "[core.oam.dev/*]" in conditions["Denied"]["message"]
    found, discovery = tracker()
    with pytest.raises(deny.Denied, match=r"core\.oam\.dev/\*"):
        await found.track("core.oam.dev/v1beta1", "Application")
    assert discovery.resolved == [] and found.hub_resources == {}


def test_the_hub_api_is_what_the_list_denies() -> None:
    """Every resource of our own API is denied as a whole kind."""
    for resource in (api.PROPAGATION_POLICIES, api.CLUSTER_PROPAGATION_POLICIES,
                     api.OVERRIDE_POLICIES, api.CLUSTER_OVERRIDE_POLICIES,
                     api.MEMBER_CLUSTERS, api.RESOURCE_BINDINGS,
                     api.CLUSTER_RESOURCE_BINDINGS, api.EVENTS):
        assert DEFAULT.kind_rule(resource.group, resource.kind) is not None


async def test_policy_events_start_no_tracking_for_denied_kinds() -> None:
    """The wiring asks the tracker to follow only the kinds the list allows."""
    found, _ = tracker()
    wiring = setup.Wiring.__new__(setup.Wiring)
    wiring.kinds = found
    wiring._tracking = set()
    followed: list[tuple[str, str]] = []

    async def track(api_version: str, kind: str) -> None:
        followed.append((api_version, kind))

    wiring._track = track  # type: ignore[method-assign]
    event: Any = types.SimpleNamespace(obj=cluster_policy(
        {"apiVersion": "v1", "kind": "Event"}, {"apiVersion": "v1", "kind": "ConfigMap"},
        {"apiVersion": "work.federation.io/v1alpha1", "kind": "ResourceBinding"}))
    found.templates = lambda group_kind=None: []  # type: ignore[method-assign]
    wiring.on_policy(event)
    for task in list(wiring._tracking):
        await task
    assert followed == [("v1", "ConfigMap")]


@hypothesis.given(
    rules=hypothesis.strategies.lists(hypothesis.strategies.sampled_from(
        [*deny.DEFAULT_RULES, deny.Rule("apps", "*", None, None),
         deny.Rule("", "ConfigMap", "shop", None), deny.Rule("", "Secret", None, "Opaque"),
         deny.Rule("*", "*", "shop", None)])),
    group=hypothesis.strategies.sampled_from(["", "apps", "policy.federation.io", "x.io"]),
    kind=hypothesis.strategies.sampled_from(["Secret", "ConfigMap", "Deployment", "Event"]),
    namespace=hypothesis.strategies.sampled_from(["shop", "kube-system", "federation-system",
                                                  "federation-agent"]),
    secret_type=hypothesis.strategies.sampled_from(
        ["Opaque", "kubernetes.io/service-account-token"]))
def test_object_rule_is_the_first_matching_rule_in_list_order(
        rules: list[deny.Rule], group: str, kind: str, namespace: str,
        secret_type: str) -> None:
    """The per-group index finds exactly what a scan of the whole list in order finds."""
    obj = {"apiVersion": f"{group}/v1" if group else "v1", "kind": kind, "type": secret_type,
           "metadata": {"name": "x", "namespace": namespace}}
    found = deny.DenyList(tuple(rules)).object_rule(obj)
    assert found is next((r for r in rules if r.matches(obj)), None)
