"""``fedctl plan --live``: the what-if, against the hub's own policies, templates and clusters.

It reads what the control plane reads (PropagationPolicies and
ClusterPropagationPolicies, the templates their selectors name, MemberClusters
with their taints, readiness and capacity, and each template's current
decision as *previous*) and places every template as the propagation
controller would, writing nothing. ``--fail NAME`` then asks "what if NAME
failed and stayed down": for each policy, the failed cluster is judged as the
failover transformer would judge it long after its toleration ran out, so a
policy that opted into failover moves its replicas and one that did not keeps
them there (see :mod:`federation.hub.failover`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from federation.contexts import client as kube
from federation.contexts import discovery, kubeconfig
from federation.hub import api, failover
from federation.hub import bindings as bindings_
from federation.hub import clusters as hub_clusters
from federation.hub import propagation_policies as hub_policies
from federation.placement import clusters as clusters_
from federation.placement import engine, loader, matching
from federation.placement import policy as policy_
from federation.placement import resources as resources_

JSON = dict[str, Any]


@dataclasses.dataclass
class HubState:
    policies: list[JSON]
    members: list[JSON]
    templates: list[JSON]
    bindings: list[JSON] = dataclasses.field(default_factory=list)
    """ResourceBindings: the record of each template's current decision."""


async def read(context: kubeconfig.Context) -> HubState:
    """Policies, MemberClusters and the templates the policies select, from the hub."""
    async with kube.connect(context) as hub:
        policies: list[JSON] = []
        for resource in api.PROPAGATION_POLICY_RESOURCES:
            policies += await _items(hub, resource)
        members = (await hub.list(api.MEMBER_CLUSTERS)).get("items", [])
        bindings: list[JSON] = []
        for resource in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS):
            bindings += (await hub.list(resource)).get("items", [])
        finder = discovery.Discovery(hub)
        templates: list[JSON] = []
        for api_version, kind in sorted(hub_policies.selected_kinds(policies)):
            try:
                resource = await finder.resolve(api_version, kind)
            except kube.ClientError:
                continue  # a kind the hub does not serve: nothing to place
            for item in (await hub.list(resource)).get("items", []):
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                templates.append(item)
    return HubState(policies, members, templates, bindings)


async def _items(hub: kube.ClusterClient, resource: kube.Resource) -> list[JSON]:
    """Every object of ``resource``; none when the hub does not serve it (a hub installed
    before it served Karmada's policy group)."""
    try:
        return list((await hub.list(resource)).get("items", []))
    except kube.ApiError as exc:
        if exc.status == 404:
            return []
        raise



def previous_decisions(state: HubState) -> dict[tuple[str, str], dict[str, int]]:
    """(namespace, binding name) -> the decision recorded there, for live templates."""
    return {(str(b["metadata"].get("namespace") or ""), str(b["metadata"]["name"])):
            record.decision() for b, record in bindings_.readable(state.bindings)
            if record is not None and not record.template_deleted}


def previous_of(template: Mapping[str, Any],
                recorded: Mapping[tuple[str, str], dict[str, int]]) -> dict[str, int]:
    meta = template.get("metadata") or {}
    key = (str(meta.get("namespace") or ""),
           bindings_.binding_name(str(meta.get("name")), str(template.get("kind"))))
    return dict(recorded.get(key, {}))


def what_if(state: HubState, failed: Sequence[str], now: float | None = None
            ) -> list[engine.Planned]:
    """Place every selected template as the controller would, with ``failed`` down for good."""
    now = time.time() if now is None else now
    policies = [p for p in (hub_policies.parse_policy(d) for d in state.policies) if p]
    recorded = previous_decisions(state)
    raw = {str(d["metadata"]["name"]): d for d in state.members}
    clusters = [_member_cluster(d) for d in state.members]
    by_name = {c.name: c for c in clusters}
    planned = []
    for template in state.templates:
        resource = _resource(template)
        found = matching.candidates(resource, policies)
        if not found:
            continue
        policy = found[0]
        previous = previous_of(template, recorded)
        fleet = [failover.engine_view(c, _judge(c, policy, raw[c.name], failed, now),
                                      holds_copy=resource.replicas == 0 and c.name in previous)
                 for c in clusters]
        decision = engine.place(resource, policy, fleet, previous)
        notes = [f"what-if: {name} failed: "
                 f"{_judge(by_name[name], policy, raw[name], failed, now).reason}"
                 for name in failed if name in by_name]
        decision = dataclasses.replace(decision, explanation=(
            matching.describe(policy, found[1:]), *notes, *decision.explanation))
        planned.append(engine.Planned(resource, policy, decision))
    return planned


#: Where a placement cluster's attributes come from in a MemberCluster (others: spec.*).
_MEMBER_FIELDS = {"name": "metadata.name", "labels": "metadata.labels",
                  "available_replicas": "status.availableReplicas", "ready": "status.conditions"}


def _member_cluster(doc: Mapping[str, Any]) -> clusters_.Cluster:
    """A MemberCluster as the engine sees it; a value out of range is one line (exit 1)."""
    try:
        return hub_clusters.member_cluster(doc, True)
    except pydantic.ValidationError as error:
        found = loader.from_validation(f"MemberCluster {doc['metadata']['name']}", error)
        field = str(error.errors()[0]["loc"][0])
        path = found.path.replace(field, _MEMBER_FIELDS.get(field, f"spec.{field}"), 1)
        raise loader.LoadError(found.where, path, found.message) from None


def _resource(template: Mapping[str, Any]) -> resources_.Resource:
    meta = template.get("metadata") or {}
    where = f"{template.get('kind')} {meta.get('namespace') or ''}/{meta.get('name')}"
    return loader.parse_resource(template, where.replace(" /", " "))


def _judge(cluster: clusters_.Cluster, policy: policy_.Policy, doc: Mapping[str, Any],
           failed: Sequence[str], now: float) -> failover.Judgement:
    tolerate = failover.toleration_time(policy.spec.placement.cluster_tolerations)
    taints = list((doc.get("spec") or {}).get("taints") or [])
    if cluster.name in failed:
        long_ago = [{"key": failover.NOT_READY_TAINT, "effect": "NoExecute",
                     "timeAdded": failover.format_time(0)}]
        judged = failover.judge(False, long_ago, tolerate, now)
        if judged.state is failover.State.EVICTED:
            # the taint's time is made up (long ago): say what was asked, not "since 1970"
            judged = dataclasses.replace(judged, reason="marked failed (what-if), past "
                                         f"tolerationSeconds {tolerate:.0f}")
        return judged
    return failover.judge(cluster.ready, taints, tolerate, now)


def unknown(state: HubState, failed: Sequence[str]) -> list[str]:
    names = {str(d["metadata"]["name"]) for d in state.members}
    return sorted(set(failed) - names)
