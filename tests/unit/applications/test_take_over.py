"""KubeVela's ``take-over`` policy: an Application adopts a member object of the identity
it renders that no one placed (KubeVela's e2e case re-typed on the in-memory fleet: the
object becomes the Application's and is deleted with it), the refusal without the policy,
the policy removed, the decision itself; and the attacks: another Application's object, a
propagated template's copy, another namespace (granted or not), a deny-listed kind, a
cluster-scoped kind, a namespace's ResourceQuota, a selector that matches everything."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation.applications import compile as compile_
from federation.applications import model, resource_policies
from federation.cli import cli
from federation.contexts.client import Resource
from federation.controllers.applications import deploy
from federation.hub import manifests
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import MC
from tests.unit.applications.test_shared_resource import delete_app, entries, reconcile
from tests.unit.controllers import fakes

JSON = dict[str, Any]
for _resource in (Resource("", "v1", "resourcequotas", "ResourceQuota"),
                  Resource("", "v1", "secrets", "Secret"),
                  Resource("apps", "v1", "replicasets", "ReplicaSet")):
    fakes.KINDS.setdefault(_resource.kind, _resource)
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
EVERYTHING = {"resourceTypes": ["Deployment", "ConfigMap", "Secret", "ResourceQuota",
                                "ReplicaSet", "Service", "Namespace", "ClusterRole"]}


def deployment(name: str = "busybox-ref", image: str = "busybox:1", **meta: Any) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, **meta},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "main", "image": image}]}}}}


def take_over_app(name: str = "take-over", objects: list[JSON] | None = None,
                  namespace: str = "shop", selector: JSON | None = None,
                  policy: bool = True, extra: list[JSON] | None = None) -> JSON:
    """KubeVela's ``app-takeover.yaml`` (test/e2e-multicluster-test): a ``k8s-objects``
    Deployment ``busybox-ref`` and a take-over policy selecting Deployments."""
    policies: list[JSON] = [{"name": "one", "type": "topology",
                             "properties": {"clusters": ["member1"]}}]
    if policy:
        policies.append({"name": "take-over", "type": "take-over", "properties": {
            "rules": [{"selector": selector or {"resourceTypes": ["Deployment"]}}]}})
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"components": [{"name": "busybox", "type": "k8s-objects", "properties": {
                "objects": objects if objects is not None else [deployment(image="busybox:2")]
            }}], "policies": policies + (extra or [])}}


def member(mc: MC, kind: str, name: str, namespace: str = "shop") -> JSON:
    found = mc.find("member1", kind, name, namespace)
    assert found is not None, f"{kind} {namespace}/{name} not in member1"
    return found


def unmanaged(mc: MC, obj: JSON, namespace: str = "shop") -> JSON:
    """``obj`` created directly in member1 (by its user or administrator)."""
    return mc.put("member1", {**copy.deepcopy(obj),
                              "metadata": {**obj["metadata"], "namespace": namespace}})


def applied(status: JSON | None) -> JSON:
    assert status is not None
    found: JSON = {c["type"]: c for c in status.get("conditions") or []}["Applied"]
    return found


def member_writes(mc: MC, name: str) -> list[tuple[str, str, str]]:
    return [w for w in mc.writes if w[1] == "member1" and w[2].endswith(f"/{name}")]


@pytest.fixture
def mc() -> MC:
    fleet = MC(fakes.cluster_set(*fakes.MEMBERS))
    for namespace in ("shop", "bank"):
        fleet.put("member1", {"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": namespace}})
    return fleet


# -- KubeVela's case -------------------------------------------------------------------------


async def test_kubevelas_e2e_case_adopts_the_deployment_and_deletes_it_with_the_app(
        mc: MC) -> None:
    """The member's Deployment is written over (same uid: an update), carries our marks
    naming the Application, is tracked, and goes when the Application is deleted."""
    before = unmanaged(mc, deployment())
    mc.put("hub", take_over_app())
    status = await reconcile(mc, "shop", "take-over")
    assert applied(status)["status"] == "True", status
    adopted = member(mc, "Deployment", "busybox-ref")
    assert adopted["metadata"]["uid"] == before["metadata"]["uid"]
    assert adopted["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:2"
    assert manifests.is_ours(adopted)
    assert manifests.application_of(adopted) == "shop/take-over"
    assert adopted["metadata"]["labels"]["app.oam.dev/name"] == "take-over"
    assert "busybox-ref" in entries(mc, "shop", "take-over")
    assert ("update", "member1", "Deployment/busybox-ref") in mc.writes

    delete_app(mc, "shop", "take-over")
    await reconcile(mc, "shop", "take-over", 1)
    assert mc.find("member1", "Deployment", "busybox-ref", "shop") is None


BARE = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "busybox-ref"}}


async def test_kubevelas_bare_example_adopts_the_member_content_as_it_is(mc: MC) -> None:
    """KubeVela's example as written names the Deployment by its metadata only: its
    three-way merge keeps the member's spec, and so is it kept here (every write being a
    full update, the member's content is written back); the marks and labels are the
    Application's, a second reconcile writes nothing, and the deletion takes it away."""
    before = unmanaged(mc, deployment())
    mc.put("hub", take_over_app(objects=[copy.deepcopy(BARE)]))
    status = await reconcile(mc, "shop", "take-over")
    assert applied(status)["status"] == "True", status
    adopted = member(mc, "Deployment", "busybox-ref")
    assert adopted["metadata"]["uid"] == before["metadata"]["uid"]
    assert adopted["spec"] == before["spec"]
    assert manifests.application_of(adopted) == "shop/take-over"
    assert adopted["metadata"]["labels"]["app.oam.dev/component"] == "busybox"
    mc.writes.clear()
    await reconcile(mc, "shop", "take-over")
    assert not member_writes(mc, "busybox-ref")
    delete_app(mc, "shop", "take-over")
    await reconcile(mc, "shop", "take-over", 1)
    assert mc.find("member1", "Deployment", "busybox-ref", "shop") is None


async def test_a_bare_configmap_keeps_its_data(mc: MC) -> None:
    before = unmanaged(mc, {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "settings"}, "data": {"k": "v"}})
    mc.put("hub", take_over_app(objects=[{"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": "settings"}}],
                                selector={"resourceTypes": ["ConfigMap"]}))
    await reconcile(mc, "shop", "take-over")
    adopted = member(mc, "ConfigMap", "settings")
    assert adopted["data"] == before["data"]
    assert manifests.application_of(adopted) == "shop/take-over"


def test_only_content_fields_are_kept() -> None:
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque",
            "data": {}, "immutable": True, "status": {}, "we.ird[0]": 1}
    assert resource_policies.member_fields(live) == ("type", "data", "immutable")
    assert resource_policies.bare(BARE) and not resource_policies.bare(deployment())


async def test_without_the_policy_the_conflict_is_named_and_nothing_written(mc: MC) -> None:
    before = unmanaged(mc, deployment())
    mc.put("hub", take_over_app(policy=False))
    status = await reconcile(mc, "shop", "take-over")
    message = applied(status)["message"]
    assert "Deployment shop/busybox-ref" in message
    assert "exists and is not managed by federation (a take-over policy selecting it " \
           "would adopt it)" in message
    assert member(mc, "Deployment", "busybox-ref") == before
    assert not member_writes(mc, "busybox-ref")


async def test_the_hint_is_given_only_where_a_take_over_would_adopt(mc: MC) -> None:
    """A ResourceQuota is never adopted: its conflict does not suggest the policy."""
    unmanaged(mc, {"apiVersion": "v1", "kind": "ResourceQuota",
                   "metadata": {"name": "compute"}, "spec": {}})
    mc.put("hub", take_over_app(policy=False, objects=[
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
         "spec": {"hard": {"pods": "1"}}}]))
    message = applied(await reconcile(mc, "shop", "take-over"))["message"]
    assert "ResourceQuota shop/compute in member1: exists and is not managed by " \
           "federation" in message
    assert deploy.TAKE_OVER_HINT not in message


async def test_a_rule_that_does_not_select_it_adopts_nothing(mc: MC) -> None:
    before = unmanaged(mc, deployment())
    mc.put("hub", take_over_app(selector={"resourceNames": ["other"]}))
    status = await reconcile(mc, "shop", "take-over")
    assert "exists and is not managed by federation" in applied(status)["message"]
    assert member(mc, "Deployment", "busybox-ref") == before


async def test_removing_the_policy_keeps_the_object_the_applications(mc: MC) -> None:
    """As KubeVela (its labels stay on the object): adopted once, the object is the
    Application's; without the policy its next release is written there as usual."""
    unmanaged(mc, deployment())
    mc.put("hub", take_over_app())
    await reconcile(mc, "shop", "take-over")
    live = mc.find("hub", "Application", "take-over", "shop")
    assert live is not None
    again = take_over_app(objects=[deployment(image="busybox:3")], policy=False)
    mc.put("hub", {**again, "metadata": live["metadata"], "status": live["status"]})
    status = await reconcile(mc, "shop", "take-over")
    assert applied(status)["status"] == "True", status
    adopted = member(mc, "Deployment", "busybox-ref")
    assert adopted["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:3"
    assert manifests.application_of(adopted) == "shop/take-over"


async def test_a_garbage_collect_rule_keeps_the_adopted_object_on_deletion(mc: MC) -> None:
    """gc ``never``: the adopted object stays in the member when the Application goes."""
    unmanaged(mc, deployment())
    mc.put("hub", take_over_app(extra=[{"name": "gc", "type": "garbage-collect", "properties": {
        "rules": [{"selector": {"resourceTypes": ["Deployment"]}, "strategy": "never"}]}}]))
    await reconcile(mc, "shop", "take-over")
    delete_app(mc, "shop", "take-over")
    await reconcile(mc, "shop", "take-over", 1)
    assert mc.find("member1", "Deployment", "busybox-ref", "shop") is not None


# -- attacks ---------------------------------------------------------------------------------


async def test_attack_another_applications_object_is_refused_naming_no_owner(
        mc: MC) -> None:
    """``thief``, of the same namespace, renders ``victim``'s Deployment and takes over
    everything: refused, the owner named by kind only; the object, its owner and its
    content unchanged; deleting the thief leaves it."""
    mc.put("hub", take_over_app("victim", policy=False))
    await reconcile(mc, "shop", "victim")
    before = member(mc, "Deployment", "busybox-ref")
    mc.put("hub", take_over_app("thief", objects=[deployment(image="evil:1")],
                                selector=EVERYTHING))
    mc.writes.clear()
    status = await reconcile(mc, "shop", "thief")
    message = applied(status)["message"]
    assert "is not taken over: another Application placed it" in message
    assert "victim" not in message
    assert member(mc, "Deployment", "busybox-ref") == before
    assert not member_writes(mc, "busybox-ref")
    delete_app(mc, "shop", "thief")
    await reconcile(mc, "shop", "thief", 1)
    assert member(mc, "Deployment", "busybox-ref") == before


async def test_attack_an_application_of_another_namespace_granted_ours(mc: MC) -> None:
    """bank's Application, granted the member namespace shop by its hub Namespace, takes
    over everything: shop's Application's object is refused as another's, and a member
    object no one placed in shop is refused too (take-over adopts only in the
    Application's own namespace; the grant lets it create there, not adopt)."""
    mc.put("hub", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "bank", "annotations": {"apps.federation.io/target-namespaces": "shop"}}})
    mc.put("hub", take_over_app("victim", policy=False))
    await reconcile(mc, "shop", "victim")
    placed = member(mc, "Deployment", "busybox-ref")
    lone = unmanaged(mc, {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "settings"}, "data": {"k": "v"}})
    objects = [deployment(image="evil:1", namespace="shop"),
               {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "shop"}, "data": {"k": "x"}}]
    mc.put("hub", take_over_app("thief", namespace="bank", objects=objects,
                                selector=EVERYTHING))
    mc.writes.clear()
    status = await reconcile(mc, "bank", "thief")
    message = applied(status)["message"]
    assert "another Application placed it" in message and "shop/victim" not in message
    assert "only in the Application's own namespace (bank)" in message
    assert member(mc, "Deployment", "busybox-ref") == placed
    assert member(mc, "ConfigMap", "settings") == lone
    assert not [w for w in mc.writes if w[1] == "member1"
                and w[2] in ("Deployment/busybox-ref", "ConfigMap/settings")]


async def test_attack_another_namespace_without_a_grant_is_refused_before_any_read(
        mc: MC) -> None:
    """An Application of shop naming bank's object: renderFailed, nothing written."""
    before = unmanaged(mc, deployment(), namespace="bank")
    mc.put("hub", take_over_app(objects=[deployment(image="evil:1", namespace="bank")],
                                selector=EVERYTHING))
    mc.writes.clear()
    status = await reconcile(mc, "shop", "take-over")
    assert status is not None and status["status"] == "renderFailed", status
    assert member(mc, "Deployment", "busybox-ref", "bank") == before
    assert not [w for w in mc.writes if w[1] != "hub"]


async def test_attack_a_propagated_templates_copy_is_refused(mc: MC) -> None:
    copy_ = manifests.mark({**deployment(), "metadata": {"name": "busybox-ref",
                                                        "namespace": "shop"}}, "template-uid")
    before = mc.put("member1", copy_)
    mc.put("hub", take_over_app(selector=EVERYTHING))
    status = await reconcile(mc, "shop", "take-over")
    assert "is not taken over: a propagated template placed it" in applied(status)["message"]
    assert member(mc, "Deployment", "busybox-ref") == before


async def test_attack_a_deny_listed_kind_is_never_written(mc: MC) -> None:
    """The member's service-account token Secret in shop, rendered under its name with
    the token type and taken over: the writer's deny list refuses it, the token stays."""
    token = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "default-token-abcde", "annotations": {
                 "kubernetes.io/service-account.name": "default"}},
             "data": {"token": "c2VjcmV0"}}
    before = unmanaged(mc, token)
    forged = copy.deepcopy(token)
    forged["data"] = {"token": "Zm9yZ2Vk"}
    mc.put("hub", take_over_app(objects=[forged], selector=EVERYTHING))
    mc.writes.clear()
    status = await reconcile(mc, "shop", "take-over")
    assert status is not None and status["status"] != "running"
    assert member(mc, "Secret", "default-token-abcde") == before
    assert not member_writes(mc, "default-token-abcde")


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "view"}, "rules": []}])
async def test_attack_a_cluster_scoped_kind_is_refused(mc: MC, obj: JSON) -> None:
    mc.put("hub", take_over_app(objects=[obj], selector=EVERYTHING))
    mc.writes.clear()
    status = await reconcile(mc, "shop", "take-over")
    assert status is not None and status["status"] == "renderFailed", status
    assert not [w for w in mc.writes if w[1] != "hub"]


async def test_attack_a_selector_matching_everything_adopts_only_what_it_may(
        mc: MC) -> None:
    """Rules over every kind: the namespace's ResourceQuota (its administrator's) and a
    ReplicaSet a member Deployment controls are refused by name; the member's objects the
    Application does not render are never read for it, let alone written; what no one
    placed and it renders is adopted."""
    quota = unmanaged(mc, {"apiVersion": "v1", "kind": "ResourceQuota",
                           "metadata": {"name": "compute"}, "spec": {"hard": {"pods": "10"}}})
    owned = unmanaged(mc, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "web-1", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": "web", "uid": "u", "controller": True}]},
        "spec": {}})
    bystander = unmanaged(mc, {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "bystander"}, "data": {"k": "v"}})
    unmanaged(mc, deployment())
    objects = [deployment(image="busybox:2"),
               {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
                "spec": {"hard": {"pods": "10000"}}},
               {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-1"},
                "spec": {"replicas": 0}}]
    mc.put("hub", take_over_app(objects=objects, selector=EVERYTHING))
    status = await reconcile(mc, "shop", "take-over")
    message = applied(status)["message"]
    assert "ResourceQuota shop/compute in member1: exists and is not taken over: a ResourceQuota " \
           "bounds the namespace" in message
    assert "a Deployment in the member controls it" in message
    assert member(mc, "ResourceQuota", "compute") == quota
    assert member(mc, "ReplicaSet", "web-1") == owned
    assert member(mc, "ConfigMap", "bystander") == bystander
    assert manifests.application_of(member(mc, "Deployment", "busybox-ref")) == \
        "shop/take-over"


# -- the policy and the decision -------------------------------------------------------------


def test_the_rules_of_every_take_over_policy_count() -> None:
    """KubeVela concatenates the rules of all take-over policies; a selector matches as
    apply-once's (an empty one matches nothing)."""
    app = take_over_app(selector={"resourceNames": ["a"]}, extra=[
        {"name": "more", "type": "take-over",
         "properties": {"rules": [{"selector": {"resourceTypes": ["ConfigMap"]}}]}},
        {"name": "empty", "type": "take-over", "properties": {"rules": [{"selector": {}}]}}])
    result = compile_.compile_app(app["spec"], "take-over", "shop", {}, FLEET)
    assert result.take_over.match(deployment("a"))
    assert result.take_over.match({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "b"}})
    assert not result.take_over.match(deployment("b"))
    plain = compile_.compile_app(take_over_app(policy=False)["spec"], "take-over", "shop",
                                 {}, FLEET)
    assert not plain.take_over.selectors


@pytest.mark.parametrize(("props", "words"), [
    ({"rules": [{"selector": {"kinds": ["Deployment"]}}]}, "kinds"),
    ({"rules": [{}]}, "selector"),
    ({"rules": "all"}, "rules"),
    ({"rule": []}, "rule")])
def test_a_malformed_policy_is_refused_by_name(props: JSON, words: str) -> None:
    app = take_over_app(policy=False, extra=[{"name": "t", "type": "take-over",
                                              "properties": props}])
    with pytest.raises(model.AppError, match=words):
        compile_.compile_app(app["spec"], "take-over", "shop", {}, FLEET)


def _live(namespace: str = "shop", labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None, **meta: Any) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "x", "namespace": namespace, "labels": labels or {},
        "annotations": annotations or {}, **meta}}


OURS = {manifests.MANAGED_BY_LABEL: manifests.MANAGER}


@pytest.mark.parametrize(("live", "on_hub", "words"), [
    (_live(), False, None),
    (_live(labels={"app": "x"}, annotations={"note": "y"}), False, None),
    (_live(labels={"app.oam.dev/name": "take-over", "app.oam.dev/namespace": "shop"}),
     False, None),
    (_live(annotations={manifests.APPLICATION_ANNOTATION: "shop/take-over"}), False, None),
    (_live(labels=OURS, annotations={manifests.APPLICATION_ANNOTATION: "bank/x"}), False,
     "another Application placed it"),
    (_live(annotations={manifests.APPLICATION_ANNOTATION: "shop/other"}), False,
     "another Application placed it"),
    (_live(annotations={resource_policies.SHARED_ANNOTATION: "true"}), False,
     "another Application placed it"),
    (_live(labels=OURS, annotations={manifests.TEMPLATE_UID_ANNOTATION: "u"}), False,
     "a propagated template placed it"),
    (_live(annotations={manifests.APPLIED_HASH_ANNOTATION: "h"}), False,
     "a propagated template placed it"),
    (_live(labels={"app.oam.dev/name": "x", "app.oam.dev/namespace": "bank"}), False,
     "another KubeVela Application manages it"),
    (_live(), True, "never writes on the hub"),
    (_live("bank"), False, "only in the Application's own namespace (shop)"),
    ({**_live(), "apiVersion": "v1", "kind": "LimitRange"}, False, "a LimitRange bounds"),
    ({**_live(), "apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "kube-root-ca.crt", "namespace": "shop"}}, False,
     "the member's own controllers keep ConfigMap kube-root-ca.crt"),
    ({**_live(), "apiVersion": "v1", "kind": "ServiceAccount",
      "metadata": {"name": "default", "namespace": "shop"}}, False,
     "the member's own controllers keep ServiceAccount default"),
    ({**_live(), "apiVersion": "v1", "kind": "ServiceAccount",
      "metadata": {"name": "web", "namespace": "shop"}}, False, None),
    (_live(ownerReferences=[{"kind": "Deployment", "controller": True}]), False,
     "a Deployment in the member controls it"),
    (_live(ownerReferences=[{"kind": "Deployment"}]), False, None),
    (_live(deletionTimestamp="2026-01-01T00:00:00Z"), False, "being deleted"),
])
def test_what_may_be_taken_over(live: JSON, on_hub: bool, words: str | None) -> None:
    why = resource_policies.not_taken_over(live, "shop/take-over", on_hub)
    if words is None:
        assert why is None
    else:
        assert why is not None and words in why
        assert "bank/x" not in why and "shop/other" not in why


async def test_a_resource_update_rule_recreates_the_adopted_object(mc: MC) -> None:
    """take-over with resource-update: a recreate field that differs makes the adoption a
    recreate (the exact version read deleted, ours created), as it would for our own."""
    settings = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                "data": {"key": "theirs"}}
    before = unmanaged(mc, settings)
    ours = {**settings, "data": {"key": "ours"}}
    mc.put("hub", take_over_app(objects=[ours], selector={"resourceTypes": ["ConfigMap"]},
                                extra=[{"name": "ru", "type": "resource-update", "properties": {
                                    "rules": [{"selector": {"resourceTypes": ["ConfigMap"]},
                                               "strategy": {"recreateFields": ["data.key"]}}]}}]))
    await reconcile(mc, "shop", "take-over")
    adopted = member(mc, "ConfigMap", "settings")
    assert adopted["metadata"]["uid"] != before["metadata"]["uid"]
    assert adopted["data"] == {"key": "ours"}
    assert manifests.application_of(adopted) == "shop/take-over"


def test_dry_run_says_which_objects_may_be_adopted(tmp_path: Path) -> None:
    """KubeVela's def-doc example through ``fedctl app dry-run``: the Deployment's line
    says it is adopted; the ConfigMap the rule does not select gets none."""
    doc = take_over_app(objects=[deployment(), {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": "c"}}])
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--local-cluster",
                                     "member1"])
    assert result.exit_code == 0, result.output
    line = "# take-over: adopted if the member holds it and no one placed it\n"
    assert result.output.count(line) == 1
    assert result.output.split(line, 1)[1].split("---")[0].count("kind: Deployment") == 1
    doc = take_over_app(objects=[BARE])
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--local-cluster",
                                     "member1"])
    assert "# take-over: adopted if the member holds it and no one placed it; given by " \
           "its metadata only, the member's content is kept\n" in result.output
