"""The one writer: shared dependency creates tolerate AlreadyExists, copies do not; the
deny list is checked on every member write path; status and delete reach the client."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import ApiError
from federation.controllers import propagation
from federation.controllers.kit import plan
from federation.controllers.kit.executor import SharedCreates, execute
from federation.hub import deny
from tests.unit.controllers.fakes import JSON, FakeMC, cluster_set, config_map


def namespace(name: str = "shop") -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def binding() -> JSON:
    return {"apiVersion": "work.federation.io/v1alpha1", "kind": "ResourceBinding",
            "metadata": {"name": "a-configmap", "namespace": "shop"}, "spec": {}}


def writer(mc: FakeMC) -> propagation.Writer:
    return propagation.Writer(mc, "hub")


async def test_shared_create_that_already_exists_counts_as_done() -> None:
    """Another template made the Namespace a moment ago: the shared create succeeds, and
    the copy that depends on it still runs."""
    mc = FakeMC(cluster_set("member1"))
    mc.put("member1", namespace())
    dag = plan.Plan()
    ns = dag.add(plan.Vertex("member1", plan.Action.CREATE, namespace()))
    copy = dag.add(plan.Vertex("member1", plan.Action.CREATE, config_map("a")))
    dag.depend(copy, on=ns)
    report = await execute(dag, writer(mc), shared={ns.key})
    assert report.ok
    assert mc.writes == [("create", "member1", "ConfigMap/a")]


async def test_already_existing_copy_is_a_failure() -> None:
    """The same 409 on a copy (not a shared key) is someone else's object: a failure."""
    mc = FakeMC(cluster_set("member1"))
    mc.put("member1", config_map("a"))
    dag = plan.Plan()
    dag.add(plan.Vertex("member1", plan.Action.CREATE, config_map("a")))
    report = await execute(dag, writer(mc), shared=())
    (failed,) = report.failed()
    assert isinstance(failed.exception, ApiError) and failed.exception.status == 409


async def test_other_errors_on_a_shared_create_are_failures() -> None:
    """Only 409 AlreadyExists is forgiven: a 403 on a shared create still fails."""
    class Forbidding(propagation.Writer):
        async def create(self, cluster: str, obj: JSON) -> JSON:
            raise ApiError(cluster, 403, "Forbidden", "namespaces is forbidden")

    shared = SharedCreates(Forbidding(FakeMC(cluster_set("member1")), "hub"),
                           {plan.vertex_key("member1", namespace())})
    with pytest.raises(ApiError, match="forbidden"):
        await shared.create("member1", namespace())


@pytest.mark.parametrize("verb", ["create", "update", "apply"])
async def test_denied_object_is_refused_in_a_member_on_every_write_path(verb: str) -> None:
    """A ResourceBinding (our own API) is never written to a member, whatever planned it;
    nothing reaches the member."""
    mc = FakeMC(cluster_set("member1"))
    with pytest.raises(deny.Denied, match=plan.REFUSED):
        await getattr(SharedCreates(writer(mc), set()), verb)("member1", binding())
    assert mc.writes == []


async def test_hub_writes_of_our_own_records_are_allowed() -> None:
    """The deny list guards members: the binding is written on the hub."""
    mc = FakeMC(cluster_set("member1"))
    await writer(mc).create("hub", binding())
    assert mc.writes == [("create", "hub", "ResourceBinding/a-configmap")]


async def test_status_write_patches_only_the_status_subresource() -> None:
    """A STATUS vertex patches the status of the named object and leaves its spec."""
    mc = FakeMC(cluster_set("member1"))
    mc.put("hub", {**config_map("a"), "status": {"old": "x"}})
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "a", "namespace": "shop"},
                            "status": {"replicas": 3}, "data": {"ignored": "yes"}}
    await SharedCreates(writer(mc), set()).patch_status("hub", body)
    stored = mc.find("hub", "ConfigMap", "a", "shop")
    assert stored is not None
    assert stored["status"] == {"old": "x", "replicas": 3} and stored["data"] == {"k": "v"}
    assert mc.writes == [("status", "hub", "ConfigMap/a")]


async def test_delete_carries_the_uid_precondition() -> None:
    """A delete names the uid it planned against: a replaced object is not deleted."""
    mc = FakeMC(cluster_set("member1"))
    live = mc.put("member1", config_map("a"))
    stale = {**live, "metadata": {**live["metadata"], "uid": "someone-elses"}}
    w = SharedCreates(writer(mc), set())
    with pytest.raises(ApiError, match="precondition"):
        await w.delete("member1", stale)
    await w.delete("member1", live)
    assert mc.find("member1", "ConfigMap", "a", "shop") is None


async def test_an_exact_delete_also_carries_the_resource_version() -> None:
    """``reference(exact=True)``: a copy rewritten since it was read survives the delete;
    a plain reference keeps the UID precondition only."""
    mc = FakeMC(cluster_set("member1"))
    read = mc.put("member1", config_map("a"))
    mc.put("member1", {**config_map("a"), "metadata": {**read["metadata"]}})  # rewritten
    w = writer(mc)
    exact = plan.reference(read, exact=True)
    assert exact[plan.PRECONDITIONS] == {"uid": read["metadata"]["uid"],
                                         "resourceVersion": read["metadata"]["resourceVersion"]}
    with pytest.raises(ApiError, match="precondition"):
        await w.delete("member1", exact)
    assert plan.PRECONDITIONS not in plan.reference(read)
    await w.delete("member1", plan.reference(read))
    assert mc.find("member1", "ConfigMap", "a", "shop") is None


async def test_apply_is_checked_against_the_deny_list_too() -> None:
    """Server-side apply (applyStrategy ServerSideApply) refuses a denied object before any
    request, its ownership patch included."""
    mc = FakeMC(cluster_set("member1"))
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "t", "namespace": "kube-system"}, plan.ADOPT: []}
    with pytest.raises(deny.Denied):
        await writer(mc).apply("member1", secret)
    assert mc.writes == []
    with pytest.raises(ApiError, match="not found"):  # allowed: reaches the client (the fake's)
        await writer(mc).apply("member1", config_map("a"))


async def test_a_report_answers_what_the_server_said() -> None:
    mc = FakeMC(cluster_set("member1"))
    dag = plan.Plan()
    vertex = dag.add(plan.Vertex("member1", plan.Action.CREATE, config_map("a")))
    report = await execute(dag, writer(mc))
    answer = report.result(vertex)
    assert answer is not None and answer["metadata"]["uid"]
    assert report.result(None) is None and report.ok
