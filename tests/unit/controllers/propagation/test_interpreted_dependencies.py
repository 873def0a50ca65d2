"""propagateDeps asks a customization's InterpretDependency for a custom kind: what the
script names is carried, under the built-in's tenant rules. The script reads the tenant's
object, so the tenant steers its answer: another namespace, a denied Secret, another kind
or a label selector is refused by name and nothing of it is written."""

from __future__ import annotations

import pytest

pytest.importorskip("lupa")

from federation.hub import bindings
from tests.unit.controllers.fakes import (
    JSON,
    FakeMC,
    cluster_set,
    config_map,
    reconciler,
    request_for,
)

MEMBERS = ("member1", "member2")

DEPENDENCIES = """function GetDependencies(obj)
  local found = {}
  for i, ref in ipairs(obj.spec.uses) do
    found[i] = {apiVersion = ref.apiVersion or "v1", kind = ref.kind, name = ref.name,
                namespace = ref.namespace or obj.metadata.namespace}
  end
  return found
end"""


def customization() -> JSON:
    return {"apiVersion": "config.karmada.io/v1alpha1",
            "kind": "ResourceInterpreterCustomization", "metadata": {"name": "widgets"},
            "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Widget"},
                     "customizations": {"dependencyInterpretation": {
                         "luaScript": DEPENDENCIES}}}}


def widget(*uses: JSON) -> JSON:
    return {"apiVersion": "example.io/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "shop"}, "spec": {"uses": list(uses)}}


def policy() -> JSON:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "w", "namespace": "shop"},
            "spec": {"propagateDeps": True,
                     "resourceSelectors": [{"apiVersion": "example.io/v1", "kind": "Widget"}],
                     "placement": {"clusterAffinity": {"clusterNames": list(MEMBERS)}}}}


def secret(name: str, namespace: str = "shop", kind: str = "Opaque") -> JSON:
    return {"apiVersion": "v1", "kind": "Secret", "type": kind,
            "metadata": {"name": name, "namespace": namespace}, "data": {"k": "c2VjcmV0"}}


async def reconciled(template: JSON, *hub_objects: JSON) -> tuple[FakeMC, JSON]:
    mc = FakeMC(cluster_set(*MEMBERS))
    for obj in (policy(), customization(), *hub_objects):
        mc.put("hub", obj)
    stored = mc.put("hub", template)
    await reconciler(mc).reconcile(request_for(stored))
    binding = mc.find("hub", "ResourceBinding", "w-widget", "shop")
    assert binding is not None
    return mc, binding


def applied(binding: JSON) -> JSON:
    return next(c for c in binding["status"]["conditions"] if c["type"] == "Applied")


def member_writes(mc: FakeMC) -> list[tuple[str, str, str]]:
    return [w for w in mc.writes if w[1] in MEMBERS]


async def test_what_the_script_names_is_carried() -> None:
    mc, binding = await reconciled(widget({"kind": "ConfigMap", "name": "cfg"}),
                                   config_map("cfg"))
    for member in MEMBERS:
        assert mc.find(member, "ConfigMap", "cfg", "shop") is not None
        assert mc.find(member, "Widget", "w", "shop") is not None
    assert bindings.BindingRecord.of(binding).behaviour.dependencies == ("ConfigMap/cfg",)


async def test_a_dependency_in_another_namespace_is_refused() -> None:
    """The attack: the tenant's Widget names kube-system's admin Secret; the script
    passes the namespace on. Nothing is written, the condition says why."""
    mc, binding = await reconciled(
        widget({"kind": "Secret", "name": "admin", "namespace": "kube-system"}),
        secret("admin", "kube-system"))
    assert (applied(binding)["status"], applied(binding)["reason"]) == \
        ("False", "DependencyDenied")
    assert "namespace 'kube-system'" in applied(binding)["message"]
    assert member_writes(mc) == []


async def test_a_denied_secret_of_the_own_namespace_is_refused() -> None:
    """The attack: a service account token of the tenant's own namespace, named through
    the script: the deny list holds, as for a pod template's reference."""
    token = secret("robot-token", kind="kubernetes.io/service-account-token")
    mc, binding = await reconciled(widget({"kind": "Secret", "name": "robot-token"}), token)
    assert applied(binding)["reason"] == "DependencyDenied"
    assert member_writes(mc) == []


@pytest.mark.parametrize(("ref", "says"), [
    ({"kind": "Service", "name": "db"}, "carries only v1"),
    ({"kind": "Secret", "name": "x", "apiVersion": "evil.io/v1"}, "carries only v1"),
    ({"kind": "ConfigMap", "name": "../../etc"}, "not a valid object name"),
])
async def test_what_propagate_deps_cannot_carry_is_refused_by_name(ref: JSON, says: str
                                                                   ) -> None:
    mc, binding = await reconciled(widget(ref))
    assert says in applied(binding)["message"]
    assert member_writes(mc) == []


async def test_a_label_selector_is_refused_by_name() -> None:
    script = customization()
    script["spec"]["customizations"]["dependencyInterpretation"]["luaScript"] = (
        "function GetDependencies(o) return {{apiVersion='v1', kind='ConfigMap', "
        "labelSelector={matchLabels={app='w'}}}} end")
    mc = FakeMC(cluster_set(*MEMBERS))
    for obj in (policy(), script):
        mc.put("hub", obj)
    await reconciler(mc).reconcile(request_for(mc.put("hub", widget())))
    binding = mc.find("hub", "ResourceBinding", "w-widget", "shop")
    assert binding is not None
    assert "labelSelector dependency is not supported" in applied(binding)["message"]
    assert member_writes(mc) == []
