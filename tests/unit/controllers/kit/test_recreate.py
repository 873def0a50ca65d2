"""The executor's recreate (a resource-update policy's ``recreateFields``): the exact
version judged ours is deleted, then the new object created; a recreate the writer would
refuse, or whose deleted object is not the one created, deletes nothing."""

from __future__ import annotations

from typing import Any

from federation.contexts.client import ApiError
from federation.controllers.kit import executor, plan
from federation.hub import deny
from tests.unit.controllers.fakes import JSON, FakeMC, cluster_set, config_map


def secret(type_: str = "Opaque", **data: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": "s", "namespace": "shop"}, "data": data or {"k": "dg=="}}


def recreate(live: JSON, new: JSON, cluster: str = "member1") -> plan.Plan:
    dag = plan.Plan()
    dag.add(plan.Vertex(cluster, plan.Action.RECREATE, new, expect=plan.Identity.of(new),
                        gone=plan.reference(live, exact=True)))
    return dag


def fleet() -> FakeMC:
    return FakeMC(cluster_set("member1"))


async def run(mc: FakeMC, dag: plan.Plan, writer: Any = None) -> plan.Report:
    return await executor.execute(dag, writer or executor.Writer(mc, "hub"))


async def test_the_version_read_is_deleted_then_the_new_object_created() -> None:
    mc = fleet()
    live = mc.put("member1", config_map("a", k="old"))
    report = await run(mc, recreate(live, config_map("a", k="new")))
    assert report.ok
    assert mc.writes == [("delete", "member1", "ConfigMap/a"),
                         ("create", "member1", "ConfigMap/a")]
    now = mc.find("member1", "ConfigMap", "a", "shop")
    assert now is not None and now["data"] == {"k": "new"}
    assert now["metadata"]["uid"] != live["metadata"]["uid"]


async def test_an_object_changed_or_replaced_since_it_was_read_survives() -> None:
    """The preconditions: a newer version (another writer's change) or another object of
    that name (ours deleted, someone else's created) is not deleted, and nothing is
    created over it."""
    for replaced in (False, True):
        mc = fleet()
        read = mc.put("member1", config_map("a", k="old"))
        if replaced:
            mc.objects.clear()
            newer = mc.put("member1", config_map("a", k="theirs"))
        else:
            newer = mc.put("member1", {**config_map("a", k="theirs"),
                                       "metadata": read["metadata"]})
        report = await run(mc, recreate(read, config_map("a", k="new")))
        (failed,) = report.failed()
        assert isinstance(failed.exception, ApiError) and failed.exception.status == 409
        assert mc.writes == []
        assert mc.find("member1", "ConfigMap", "a", "shop") == newer


async def test_attack_a_recreate_into_a_denied_object_deletes_nothing() -> None:
    """The attack: our Opaque Secret recreated as a service-account token (the deny
    list's): refused before the delete, so the member keeps the Secret it had, instead of
    losing it to a create that was never allowed."""
    mc = fleet()
    live = mc.put("member1", secret())
    report = await run(mc, recreate(live, secret("kubernetes.io/service-account-token")))
    (failed,) = report.failed()
    assert failed.refused and isinstance(failed.exception, deny.Denied)
    assert mc.writes == []
    assert mc.find("member1", "Secret", "s", "shop") == live


async def test_a_recreate_deleting_another_object_than_it_creates_is_refused() -> None:
    """The executor's last check: the deleted object must be the created one (group,
    kind, namespace, name) and carry its UID; otherwise nothing is written."""
    mc = fleet()
    other = mc.put("member1", config_map("other"))
    mine = mc.put("member1", config_map("a"))
    for gone in (plan.reference(other, exact=True), plan.reference(mine)):
        dag = plan.Plan()
        dag.add(plan.Vertex("member1", plan.Action.RECREATE, config_map("a", k="new"),
                            expect=plan.Identity.of(mine), gone=gone))
        (failed,) = (await run(mc, dag)).failed()
        assert failed.refused and not failed.attempted
    assert mc.writes == []


async def test_a_recreate_on_the_hub_or_through_a_writer_without_it_is_refused() -> None:
    mc = fleet()
    live = mc.put("hub", config_map("a"))
    (failed,) = (await run(mc, recreate(live, config_map("a", k="new"), "hub"))).failed()
    assert failed.refused

    class Plain:  # a plan.Writer without recreate: it must not be asked to write at all
        async def create(self, cluster: str, obj: JSON) -> JSON:
            raise AssertionError("create")

        update = apply = patch_status = delete = create

    (failed,) = (await plan.execute(recreate(live, config_map("a"), "member1"),
                                    Plain())).failed()
    assert failed.refused and "cannot recreate" in (failed.error or "")
    assert mc.writes == []


async def test_an_object_already_gone_is_created() -> None:
    """An earlier recreate deleted it and its create failed; the cache still showed the
    old version, so the plan deletes it again: the 404 means nothing of that name is
    there, and the create (which never overwrites) follows."""
    mc = fleet()
    live = mc.put("member1", config_map("a", k="old"))
    mc.objects.clear()
    report = await run(mc, recreate(live, config_map("a", k="new")))
    assert report.ok
    assert mc.writes == [("create", "member1", "ConfigMap/a")]
