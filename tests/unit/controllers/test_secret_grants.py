"""Secrets of a namespace the control plane may not read are never a silent skip
(finding 4, the controllers' side): the policy that selects them says so
(``SecretsReadable``), a workload that carries one stops with ``DependencyNotReadable``
and is requeued by the grant, and nothing is ever taken for deleted."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from federation.contexts.client import Resource
from federation.contexts.scoped import NotGranted
from federation.controllers import policy_validation
from federation.controllers.kit import secrets
from federation.controllers.propagation import propagate_deps
from federation.runtime.reconcile import Request
from tests.unit.controllers.fakes import FakeMC, cluster_set, reconciler, request_for
from tests.unit.controllers.propagation.test_karmada_behaviour import (
    MEMBERS,
    conditions,
    deployment,
    deployment_policy,
    member_writes,
)
from tests.unit.controllers.test_deny import FakeRecorder, PolicyMC

JSON = dict[str, Any]


class Access:
    """What policy validation asks of the Secret cache: the granted namespaces."""

    def __init__(self, granted: frozenset[str] | str | None) -> None:
        self.value = granted

    def granted(self) -> frozenset[str] | str | None:
        return self.value


def policy(kind: str, *selectors: JSON, namespace: str | None = "team-a") -> JSON:
    meta: JSON = {"name": "p", "uid": "u"}
    if kind == "PropagationPolicy":
        meta["namespace"] = namespace
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": kind, "metadata": meta,
            "spec": {"resourceSelectors": list(selectors), "placement": {}}}


SECRET = {"apiVersion": "v1", "kind": "Secret"}


async def validate(doc: JSON, access: Access) -> tuple[dict[str, JSON], list[Any], Any]:
    mc, recorder = PolicyMC(doc), FakeRecorder()
    reconciler_ = policy_validation.Reconciler(mc, "hub", recorder, access=access)
    kind = f"{doc['kind']}.policy.federation.io"
    meta = doc["metadata"]
    request = Request("hub", kind, meta.get("namespace") or "", meta["name"])
    result = await reconciler_.reconcile(request)
    found = {c["type"]: c for c in mc.status.patches[0]["status"]["conditions"]} \
        if mc.status.patches else {}
    return found, recorder.events, result


async def test_a_policy_selecting_secrets_of_an_ungranted_namespace_says_so() -> None:
    """Not a silent skip: SecretsReadable=False (NotGranted) naming the namespace and how
    an admin grants it, and a Warning event."""
    found, events, _ = await validate(policy("PropagationPolicy", SECRET),
                                      Access(frozenset({"team-b"})))
    readable = found[secrets.CONDITION]
    assert (readable["status"], readable["reason"]) == ("False", "NotGranted")
    assert "namespace team-a" in readable["message"]
    assert "fedctl install --secret-namespaces team-a" in readable["message"]
    assert ("Warning", "SecretsNotReadable") in [(e[1], e[2]) for e in events]


async def test_a_granted_namespace_reads_true() -> None:
    found, events, _ = await validate(policy("PropagationPolicy", SECRET),
                                      Access(frozenset({"team-a"})))
    assert found[secrets.CONDITION]["status"] == "True"
    assert not [e for e in events if e[2] == "SecretsNotReadable"]


async def test_a_cluster_policy_selecting_every_secret_names_the_granted_namespaces() -> None:
    """Every namespace: only the granted ones are read, and the condition lists them."""
    found, _, _ = await validate(policy("ClusterPropagationPolicy", SECRET),
                                 Access(frozenset({"team-a", "team-b"})))
    readable = found[secrets.CONDITION]
    assert (readable["status"], readable["reason"]) == ("False", "GrantedNamespacesOnly")
    assert "team-a, team-b" in readable["message"]
    named, _, _ = await validate(policy("ClusterPropagationPolicy",
                                        {**SECRET, "namespace": "kube-system"}),
                                 Access(frozenset({"team-a"})))
    assert "never read: kube-system is a system namespace" in \
        named[secrets.CONDITION]["message"]


async def test_no_condition_for_other_kinds_and_none_written_while_grants_are_listed() -> None:
    found, _, _ = await validate(policy("PropagationPolicy",
                                        {"apiVersion": "v1", "kind": "ConfigMap"}),
                                 Access(frozenset()))
    assert secrets.CONDITION not in found
    found, _, result = await validate(policy("PropagationPolicy", SECRET), Access(None))
    assert found == {} and result.requeue_after == policy_validation.GRANTS_RECHECK
    found, _, _ = await validate(policy("PropagationPolicy", SECRET),
                                 Access("cannot list RoleBindings: 403"))
    assert found[secrets.CONDITION]["reason"] == "GrantsUnknown"


class UngrantedSecrets(FakeMC):
    """Hub Secrets of ``shop`` are not granted: reads raise as the scoped cache does."""

    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  cluster: str, allow_stale: bool = False, copy: bool = True) -> Any:
        if cluster == "hub" and resource.kind == "Secret" and namespace == "shop":
            raise NotGranted("hub", secrets.refusal("shop"))
        return await super().get(resource, name, namespace, cluster=cluster,
                                 allow_stale=allow_stale, copy=copy)


async def test_a_dependency_in_an_ungranted_namespace_stops_the_workload_visibly() -> None:
    """propagateDeps naming a Secret the control plane may not read: nothing is written,
    Applied=False DependencyNotReadable names the namespace, and the binding records the
    Secret as awaited, so the namespace's grant (its first list, as news) requeues it."""
    mc = UngrantedSecrets(cluster_set(*MEMBERS))
    mc.put("hub", deployment_policy(propagateDeps=True))
    template = mc.put("hub", deployment(volumes=[{"name": "t",
                                                  "secret": {"secretName": "creds"}}]))
    await reconciler(mc).reconcile(request_for(template))
    assert member_writes(mc) == []
    applied = conditions(mc, "web-deployment")["Applied"]
    assert (applied["status"], applied["reason"]) == ("False", "DependencyNotReadable")
    assert "Secrets of namespace shop are not readable" in applied["message"]
    binding = mc.find("hub", "ResourceBinding", "web-deployment", "shop")
    assert binding is not None and binding["spec"]["awaitedDependencies"] == ["Secret/creds"]
    index = propagate_deps.Dependents()
    index.binding_changed(binding, deleted=False)
    assert [t["name"] for t in index.carriers("shop", "Secret", "creds", awaiting=True)] == \
        ["web"]


async def test_a_secret_template_no_longer_readable_is_left_as_it_is(
        caplog: pytest.LogCaptureFixture) -> None:
    """A propagated Secret whose namespace lost its grant: its reconcile deletes nothing
    (NotGranted is not 'gone') and ends quietly, to be requeued by the grant's return."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
                   "metadata": {"name": "s", "namespace": "shop"},
                   "spec": {"resourceSelectors": [SECRET], "placement": {
                       "clusterAffinity": {"clusterNames": list(MEMBERS)}}}})
    template = mc.put("hub", {"apiVersion": "v1", "kind": "Secret",
                              "metadata": {"name": "creds", "namespace": "shop"},
                              "data": {"k": "dg=="}})
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    assert all(mc.find(m, "Secret", "creds", "shop") is not None for m in MEMBERS)
    revoked = UngrantedSecrets(mc.clusters)
    revoked.objects, revoked.writes = mc.objects, mc.writes
    before = len(mc.writes)
    with caplog.at_level(logging.INFO, "federation.propagation"):
        assert await reconciler(revoked).reconcile(request_for(template)) is None
    assert "Secret shop/creds left as it is" in caplog.text
    assert mc.writes[before:] == []
    assert all(mc.find(m, "Secret", "creds", "shop") is not None for m in MEMBERS)
