"""resource-update on the in-memory fleet, through the real reconciler and executor:
KubeVela's e2e Application (test/e2e-multicluster-test, "Test application with
resource-update policy": an immutable Secret recreated when ``data.key`` changes, a
ConfigMap replaced so a key added in the member goes), and the attacks: another
Application's rule naming our objects deletes none of them."""

from __future__ import annotations

import copy
from typing import Any

from federation.contexts.client import Resource
from federation.controllers import applications
from federation.runtime.reconcile import Request
from tests.unit.applications.test_controller import MC, Clock, must, world
from tests.unit.controllers import fakes

__all__ = ["world"]  # the fixture
SECRETS = Resource("", "v1", "secrets", "Secret")
fakes.KINDS.setdefault("Secret", SECRETS)
JSON = dict[str, Any]
RULES: list[JSON] = [
    {"selector": {"resourceTypes": ["Secret"]}, "strategy": {"recreateFields": ["data.key"]}},
    {"selector": {"resourceTypes": ["ConfigMap"]}, "strategy": {"op": "replace"}}]


def recreate_app(name: str = "recreate", key: str = "dgo=", value: str = "val",
                 rules: list[JSON] | None = None, objects: str = "recreate") -> JSON:
    return {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"components": [{"type": "k8s-objects", "name": name, "properties": {
            "objects": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": objects},
                         "data": {"key": key, "value": "dgo="}, "immutable": True},
                        {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": objects}, "data": {"key": value}}]}}],
            "policies": [{"type": "topology", "name": "one",
                          "properties": {"clusters": ["member1"]}},
                         {"type": "resource-update", "name": "resource-update",
                          "properties": {"rules": RULES if rules is None else rules}}]}}


def apply(mc: MC, body: JSON) -> Request:
    meta = body["metadata"]
    live = mc.find("hub", "Application", meta["name"], "shop")
    if live is not None:
        body = {**body, "metadata": {**meta, "uid": live["metadata"]["uid"]},
                "status": live.get("status")}
    mc.put("hub", copy.deepcopy(body))
    return Request("hub", applications.APP_KIND, "shop", meta["name"])


async def test_kubevelas_e2e_case(world: tuple[MC, Any, Clock]) -> None:
    """The Secret is deleted and created again (a new uid: an immutable Secret cannot be
    updated); the ConfigMap is updated whole, the key someone added in the member gone."""
    mc, reconciler, _ = world
    await reconciler.reconcile(apply(mc, recreate_app()))
    first = must(mc, "member1", "Secret", "recreate")
    config_map = must(mc, "member1", "ConfigMap", "recreate")
    config_map["data"]["extra"] = "extra-val"
    mc.put("member1", config_map)
    await reconciler.reconcile(apply(mc, recreate_app(key="dnZ2Cg==", value="val2")))
    second = must(mc, "member1", "Secret", "recreate")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["data"] == {"key": "dnZ2Cg==", "value": "dgo="}
    assert must(mc, "member1", "ConfigMap", "recreate")["data"] == {"key": "val2"}
    writes = [w for w in mc.writes if w[1] == "member1" and "recreate" in w[2]]
    assert ("delete", "member1", "Secret/recreate") in writes
    assert ("delete", "member1", "ConfigMap/recreate") not in writes
    status = must(mc, "hub", "Application", "recreate")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}.get("Applied") != "False"


async def test_attack_another_applications_rule_deletes_none_of_our_objects(
        world: tuple[MC, Any, Clock]) -> None:
    """A second Application of the namespace renders objects of the names ours placed,
    with other content and rules recreating them by name, kind and component: ours stay
    as they are (same uid, same data); the thief's Applied condition names the owner."""
    mc, reconciler, _ = world
    await reconciler.reconcile(apply(mc, recreate_app()))
    before = {kind: must(mc, "member1", kind, "recreate") for kind in ("Secret", "ConfigMap")}
    rules = [{"selector": {"resourceNames": ["recreate"]},
              "strategy": {"recreateFields": ["data.key"]}},
             {"selector": {"resourceTypes": ["Secret", "ConfigMap"]},
              "strategy": {"recreateFields": ["data"]}}]
    thief = recreate_app("thief", key="cHduZWQ=", value="pwned", rules=rules)
    mc.writes.clear()
    await reconciler.reconcile(apply(mc, thief))
    for kind, obj in before.items():
        assert must(mc, "member1", kind, "recreate") == obj
    assert not [w for w in mc.writes if w[1] == "member1" and "recreate" in w[2]]
    status = must(mc, "hub", "Application", "thief")["status"]
    applied = {c["type"]: c for c in status["conditions"]}["Applied"]
    assert applied["status"] == "False"
    assert "was placed by Application shop/recreate" in applied["message"]


async def test_attack_a_rule_from_another_namespace_reaches_nothing_there(
        world: tuple[MC, Any, Clock]) -> None:
    """An Application of namespace ``attacker`` renders our objects' identities in
    ``shop`` with a rule recreating them: a rule selects only what its own Application
    renders, and rendering into another namespace is refused (renderFailed), so nothing
    of ``shop`` is written, let alone deleted."""
    mc, reconciler, _ = world
    await reconciler.reconcile(apply(mc, recreate_app()))
    before = must(mc, "member1", "Secret", "recreate")
    thief = recreate_app("thief", key="cHduZWQ=")
    thief["metadata"]["namespace"] = "attacker"
    for obj in thief["spec"]["components"][0]["properties"]["objects"]:
        obj["metadata"]["namespace"] = "shop"
    mc.put("hub", thief)
    mc.writes.clear()
    await reconciler.reconcile(Request("hub", applications.APP_KIND, "attacker", "thief"))
    assert not [w for w in mc.writes if w[1] != "hub"]
    assert must(mc, "member1", "Secret", "recreate") == before
    found = mc.find("hub", "Application", "thief", "attacker")
    assert found is not None and found["status"]["status"] == "renderFailed"
