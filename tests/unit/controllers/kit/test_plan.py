"""The plan DAG and its executor: order, concurrency, failure propagation."""

import asyncio
from typing import Any

import pytest

from federation.controllers.kit import plan


def obj(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


class RecordingWriter:
    def __init__(self, fail: set[str] | None = None, delay: dict[str, float] | None = None):
        self.calls: list[tuple[str, str, str]] = []
        self.fail = fail or set()
        self.delay = delay or {}

    async def _do(self, verb: str, cluster: str, o: dict[str, Any]) -> dict[str, Any]:
        name = o["metadata"]["name"]
        await asyncio.sleep(self.delay.get(name, 0))
        if name in self.fail:
            raise RuntimeError(f"{name} refused")
        self.calls.append((verb, cluster, name))
        return o

    async def create(self, cluster: str, o: dict[str, Any]) -> dict[str, Any]:
        return await self._do("create", cluster, o)

    async def update(self, cluster: str, o: dict[str, Any]) -> dict[str, Any]:
        return await self._do("update", cluster, o)

    async def delete(self, cluster: str, o: dict[str, Any]) -> dict[str, Any]:
        return await self._do("delete", cluster, o)

    async def patch_status(self, cluster: str, o: dict[str, Any]) -> dict[str, Any]:
        return await self._do("status", cluster, o)

    async def apply(self, cluster: str, o: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("no action calls apply")


def namespace_then_object(cluster: str = "m1") -> tuple[plan.Plan, plan.Vertex, plan.Vertex]:
    p = plan.Plan()
    ns = p.add(plan.Vertex(cluster, plan.Action.CREATE, obj("Namespace", "team")))
    cm = p.add(plan.Vertex(cluster, plan.Action.CREATE, obj("ConfigMap", "cfg", "team")))
    p.depend(cm, on=ns)
    return p, ns, cm


async def test_dependencies_are_written_first() -> None:
    """A namespace is created before the object in it."""
    p, _, _ = namespace_then_object()
    writer = RecordingWriter(delay={"team": 0.05})
    report = await plan.execute(p, writer)
    assert report.ok
    assert [c[2] for c in writer.calls] == ["team", "cfg"]


async def test_failed_dependency_skips_dependents_and_says_why() -> None:
    """When the namespace fails, the object is not attempted and the outcome says so."""
    p, ns, cm = namespace_then_object()
    report = await plan.execute(p, RecordingWriter(fail={"team"}))
    assert not report.ok
    assert report.outcomes[ns.key].error == "team refused"
    skipped = report.outcomes[cm.key]
    assert not skipped.attempted and not skipped.ok
    assert skipped.error == "not attempted: create Namespace team in m1 failed: team refused"


async def test_a_chain_of_skips_names_the_first_failure_and_its_cause() -> None:
    """Namespace -> ConfigMap -> Widget: the widget's outcome names the namespace and its
    error, not the skipped ConfigMap in between."""
    p, _, middle = namespace_then_object()
    widget = p.add(plan.Vertex("m1", plan.Action.CREATE, obj("Widget", "w", "team")))
    p.depend(widget, on=middle)
    report = await plan.execute(p, RecordingWriter(fail={"team"}))
    assert report.outcomes[widget.key].error == \
        "not attempted: create Namespace team in m1 failed: team refused"


async def test_one_slow_cluster_does_not_delay_another() -> None:
    """Independent chains run concurrently: m2's object lands while m1 is still busy."""
    p = plan.Plan()
    slow = p.add(plan.Vertex("m1", plan.Action.CREATE, obj("ConfigMap", "slow", "a")))
    p.add(plan.Vertex("m2", plan.Action.CREATE, obj("ConfigMap", "fast", "a")))
    writer = RecordingWriter(delay={"slow": 0.2})
    report = await plan.execute(p, writer)
    assert report.ok and slow.key in report.outcomes
    assert [c[2] for c in writer.calls] == ["fast", "slow"]


async def test_noop_vertices_write_nothing() -> None:
    """Unchanged objects produce no write."""
    p = plan.Plan()
    p.add(plan.Vertex("m1", plan.Action.NOOP, obj("ConfigMap", "same", "a")))
    writer = RecordingWriter()
    report = await plan.execute(p, writer)
    assert report.ok and writer.calls == []
    assert p.writes() == []


def test_cycles_and_dangling_edges_are_rejected() -> None:
    """An inconsistent plan is an error before anything is written."""
    p, ns, cm = namespace_then_object()
    p.depend(ns, on=cm)
    with pytest.raises(plan.PlanError, match="cycle"):
        p.order()
    q = plan.Plan()
    lone = q.add(plan.Vertex("m1", plan.Action.CREATE, obj("ConfigMap", "x", "a")))
    lone.depends_on.add("nowhere")
    with pytest.raises(plan.PlanError, match="not in the plan"):
        q.order()


def test_adding_the_same_object_twice_keeps_one_vertex() -> None:
    """Vertices are keyed by cluster and object identity."""
    p = plan.Plan()
    first = p.add(plan.Vertex("m1", plan.Action.CREATE, obj("Namespace", "team")))
    second = p.add(plan.Vertex("m1", plan.Action.CREATE, obj("Namespace", "team")))
    assert first is second and len(p) == 1


async def test_every_action_reaches_its_verb() -> None:
    """create, update, status and delete each call the matching writer method."""
    p = plan.Plan()
    for index, action in enumerate([plan.Action.CREATE, plan.Action.UPDATE,
                                    plan.Action.STATUS, plan.Action.DELETE]):
        p.add(plan.Vertex("m1", action, obj("ConfigMap", f"o{index}", "a")))
    writer = RecordingWriter()
    assert (await plan.execute(p, writer)).ok
    assert sorted(writer.calls) == [("create", "m1", "o0"), ("delete", "m1", "o3"),
                                    ("status", "m1", "o2"), ("update", "m1", "o1")]


def template_identity() -> plan.Identity:
    return plan.Identity.of({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "cfg", "namespace": "team"}})


@pytest.mark.parametrize(("changed", "why"), [
    ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
      "metadata": {"name": "cfg"}},
     "the object to write is ClusterRoleBinding.rbac.authorization.k8s.io cfg, "
     "not ConfigMap team/cfg"),
    (obj("ConfigMap", "cfg", "kube-system"), "is ConfigMap kube-system/cfg, not"),
    (obj("ConfigMap", "other", "team"), "is ConfigMap team/other, not"),
    (obj("Secret", "cfg", "team"), "is Secret team/cfg, not"),
    ({"apiVersion": "example.com/v1", "kind": "ConfigMap",
      "metadata": {"name": "cfg", "namespace": "team"}}, "is ConfigMap.example.com team/cfg"),
])
async def test_a_write_whose_identity_differs_from_the_expected_one_is_refused(
        changed: dict[str, Any], why: str) -> None:
    """Whatever produced the object (an override bug), the executor writes nothing whose
    group, kind, namespace or name is not the template's, and says why; dependents are
    not attempted."""
    p = plan.Plan()
    write = p.add(plan.Vertex("m1", plan.Action.CREATE, changed, expect=template_identity()))
    after = p.add(plan.Vertex("m1", plan.Action.CREATE, obj("ConfigMap", "later", "team")))
    p.depend(after, on=write)
    writer = RecordingWriter()
    report = await plan.execute(p, writer)
    refused = report.outcomes[write.key]
    assert writer.calls == []
    assert not refused.ok and not refused.attempted and refused.refused
    assert refused.error is not None and refused.error.startswith(plan.REFUSED)
    assert why in refused.error
    assert not report.outcomes[after.key].attempted


async def test_a_write_with_the_expected_identity_goes_through() -> None:
    """Same group, kind, namespace and name (the version may differ): written; a failure
    that is not a refusal is not reported as one."""
    p = plan.Plan()
    p.add(plan.Vertex("m1", plan.Action.UPDATE, obj("ConfigMap", "cfg", "team"),
                      expect=template_identity()))
    writer = RecordingWriter()
    assert (await plan.execute(p, writer)).ok and writer.calls == [("update", "m1", "cfg")]
    failing = await plan.execute(p, RecordingWriter(fail={"cfg"}))
    assert not failing.ok and not failing.failed()[0].refused
    v1 = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"}}
    assert plan.Identity.of(v1).mismatch({**v1, "apiVersion": "apps/v1beta2"}) is None
