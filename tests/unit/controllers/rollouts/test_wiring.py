"""The wiring: what `setup` registers, and which hub events requeue which policies."""

from __future__ import annotations

from typing import Any

from federation.contexts import client as kube
from federation.contexts.cache import ClusterCache, Event, Informer
from federation.controllers import setup
from federation.controllers.rollouts import POLICY_KIND, Wiring, view
from federation.hub import api
from federation.hub import rollouts as hub_api
from federation.runtime.reconcile import Request
from tests.unit.clients import Unserved
from tests.unit.controllers.test_outages import RecordingManager, registered


def manager() -> RecordingManager:
    mgr = RecordingManager()
    mgr.clusters.hub.cache = ClusterCache(Unserved(), cluster="hub")
    return mgr


def policy(name: str, namespace: str, config: str = "cfg", kind: str = "ConfigMap",
           constraint: str = "mysql", workload: str = "app") -> dict[str, Any]:
    return {"apiVersion": "config.federation.io/v1alpha1", "kind": "ReconfigurePolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"configRef": {"kind": kind, "name": config},
                     "files": [{"key": "my.ini", "constraintRef": constraint}],
                     "workloads": [{"kind": "Deployment", "name": workload}]}}


def wired(*policies: dict[str, Any]) -> tuple[RecordingManager, Wiring]:
    mgr = manager()
    wiring = Wiring(mgr, setup.Settings().reconfigure)
    assert mgr.clusters.hub.cache is not None
    store = mgr.clusters.hub.cache.informer(hub_api.RECONFIGURE_POLICIES).store
    for doc in policies:
        store.put(doc)
    return mgr, wiring


def request(name: str, namespace: str) -> Request:
    return Request("hub", POLICY_KIND, namespace, name)


def event(resource: kube.Resource, obj: dict[str, Any]) -> Event:
    return Event("MODIFIED", "hub", resource, obj)


def test_setup_registers_the_rollout_and_constraint_controllers() -> None:
    controllers = registered(setup.Settings())
    rollout = controllers["reconfigure"]
    watched = {w.resource for w in rollout.watches}
    assert watched == {hub_api.RECONFIGURE_POLICIES, hub_api.CONFIG_CONSTRAINTS,
                       hub_api.KUBEBLOCKS_CONFIG_CONSTRAINTS,
                       hub_api.KUBEBLOCKS_PARAMETERS_DEFINITIONS, api.RESOURCE_BINDINGS}
    assert all(w.clusters == "hub" for w in rollout.watches)
    assert [w.resource for w in controllers["config-constraints"].watches] == [
        hub_api.CONFIG_CONSTRAINTS]


def test_a_policy_event_requeues_its_namespace_and_follows_its_config_kind() -> None:
    a, b = policy("a", "ns1"), policy("b", "ns1", config="other", workload="x")
    mgr, wiring = wired(a, b, policy("c", "ns2"))
    secret_policy = policy("s", "ns1", kind="Secret")
    found = list(wiring.on_policy(event(hub_api.RECONFIGURE_POLICIES, secret_policy)))
    assert found == [request("a", "ns1"), request("b", "ns1"), request("s", "ns1")]
    assert mgr.clusters.hub.cache is not None
    assert view.SECRETS in mgr.clusters.hub.cache.informers  # followed once named
    assert kube.CONFIGMAPS not in mgr.clusters.hub.cache.informers


def test_config_constraint_and_binding_events_map_to_the_policies_they_concern() -> None:
    _, wiring = wired(policy("a", "ns1"), policy("b", "ns2", constraint="other"),
                      policy("c", "ns2", config="cfg2", workload="w2"))
    constraint = {"metadata": {"name": "mysql"}}
    assert sorted(wiring.on_constraint(event(hub_api.CONFIG_CONSTRAINTS, constraint))) == [
        request("a", "ns1"), request("c", "ns2")]
    # KubeBlocks' ConfigConstraint of the same name concerns no policy naming ours.
    assert list(wiring.on_constraint(event(hub_api.KUBEBLOCKS_CONFIG_CONSTRAINTS,
                                           constraint))) == []
    config = {"kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "ns2"}}
    assert list(wiring.on_config(event(kube.CONFIGMAPS, config))) == [request("b", "ns2")]
    binding = {"spec": {"resource": {"kind": "Deployment", "name": "w2", "namespace": "ns2"}}}
    assert list(wiring.on_binding(event(api.RESOURCE_BINDINGS, binding))) == [
        request("c", "ns2")]
    elsewhere = {"spec": {"resource": {"kind": "Deployment", "name": "w2", "namespace": "ns9"}}}
    assert list(wiring.on_binding(event(api.RESOURCE_BINDINGS, elsewhere))) == []
    # Unreadable: propagation changes nothing of its template, so no rollout looks either.
    unreadable = {"spec": {"resource": {"kind": "Deployment", "name": "w2",
                                        "namespace": "ns2"}, "clusters": "member1"}}
    assert list(wiring.on_binding(event(api.RESOURCE_BINDINGS, unreadable))) == []


def test_a_binding_where_no_policy_lives_is_not_parsed(monkeypatch: Any) -> None:
    """A binding event in a namespace without a ReconfigurePolicy concerns no policy (one
    made later reconciles on its own event), so its record is never parsed: a cold start
    parsed all 10,000 bindings of a fleet without a policy, a quarter of its CPU."""
    from federation.hub import bindings

    _, wiring = wired(policy("c", "ns2", config="cfg2", workload="w2"))
    parsed: list[object] = []
    read = bindings.read

    def counted(obj: dict[str, Any]) -> object:
        parsed.append(obj)
        return read(obj)

    monkeypatch.setattr(bindings, "read", counted)
    quiet = {"metadata": {"name": "w2-deployment", "namespace": "ns9"},
             "spec": {"resource": {"kind": "Deployment", "name": "w2", "namespace": "ns9"}}}
    assert list(wiring.on_binding(event(api.RESOURCE_BINDINGS, quiet))) == [] and parsed == []
    governed = {"metadata": {"name": "w2-deployment", "namespace": "ns2"},
                "spec": {"resource": {"kind": "Deployment", "name": "w2", "namespace": "ns2"}}}
    assert list(wiring.on_binding(event(api.RESOURCE_BINDINGS, governed))) == [
        request("c", "ns2")]
    assert parsed == [governed]


def test_a_kubeblocks_constraint_event_requeues_the_policies_naming_it() -> None:
    kb = policy("k", "ns1")
    kb["spec"]["files"][0]["constraintKind"] = "ParametersDefinition.parameters.kubeblocks.io"
    _, wiring = wired(policy("a", "ns1"), kb)
    definition = {"metadata": {"name": "mysql"}}
    assert list(wiring.on_constraint(event(hub_api.KUBEBLOCKS_PARAMETERS_DEFINITIONS,
                                           definition))) == [request("k", "ns1")]


def test_a_followed_config_change_queues_its_policies() -> None:
    mgr, wiring = wired(policy("a", "ns1"))
    wiring.follow("ConfigMap")
    assert mgr.clusters.hub.cache is not None
    informer = mgr.clusters.hub.cache.informer(kube.CONFIGMAPS)
    assert isinstance(informer, Informer)
    config = {"kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "ns1"}}
    informer._emit(Event("ADDED", "hub", kube.CONFIGMAPS, config, initial=True))
    assert len(wiring.controller.queue) == 0  # the first list: reconciled at start anyway
    informer._emit(Event("MODIFIED", "hub", kube.CONFIGMAPS, config))
    assert len(wiring.controller.queue) == 1
