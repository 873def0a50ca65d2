"""A reconcile that would act on a cache still showing what our own last write replaced
waits a moment instead (no second binding create, no duplicate status patch); another
version, or the end of the wait, lets it go on."""

from __future__ import annotations

from federation.controllers.kit import expectations, plan
from federation.runtime.reconcile import Result
from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)


def binding(version: str | None) -> dict[str, object]:
    meta = {"name": "a-configmap", "namespace": "shop",
            **({"resourceVersion": version} if version else {})}
    return {"apiVersion": "federation.io/v1alpha1", "kind": "ResourceBinding",
            "metadata": meta}


def report_of(*vertices: plan.Vertex) -> plan.Report:
    return plan.Report({v.key: plan.Outcome(v, ok=True) for v in vertices})


async def test_a_binding_the_cache_has_not_shown_is_not_created_twice() -> None:
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    assert await r.reconcile(request_for(template)) is None
    writes = len(mc.writes)
    mc.unseen.add(("hub", "ResourceBinding", "a-configmap"))  # the watch is behind
    assert await r.reconcile(request_for(template)) == \
        Result(requeue_after=expectations.RECHECK)
    assert len(mc.writes) == writes
    mc.unseen.clear()  # the create arrives: the next reconcile acts (and has nothing to do)
    assert await r.reconcile(request_for(template)) is None
    assert len(mc.writes) == writes and len(r.expectations) == 0


def test_a_replaced_version_still_cached_is_behind_until_another_shows() -> None:
    now = [0.0]
    expect = expectations.Expectations(lambda: now[0])
    key = expectations.object_key(binding(None))
    update = plan.Vertex("hub", plan.Action.UPDATE, binding("7"))
    expect.observe(report_of(update), "hub")
    assert expect.behind(key, binding("7"))
    assert not expect.behind(key, binding("8"))  # ours (or a later write) arrived
    assert not expect.behind(key, binding("7"))  # forgotten once seen


def test_a_status_patch_waits_on_the_template_version_it_read() -> None:
    now = [0.0]
    expect = expectations.Expectations(lambda: now[0])
    template = {**config_map("a"), "metadata": {"name": "a", "namespace": "shop",
                                                "resourceVersion": "3"}}
    status = plan.Vertex("hub", plan.Action.STATUS,
                         {**config_map("a"), "status": {"x": 1}}, replacing="3")
    expect.observe(report_of(status), "hub")
    assert expect.behind(expectations.object_key(template), template)


def test_the_wait_ends_after_its_deadline_and_failures_are_not_expected() -> None:
    now = [0.0]
    expect = expectations.Expectations(lambda: now[0])
    key = expectations.object_key(binding(None))
    create = plan.Vertex("hub", plan.Action.CREATE, binding(None))
    expect.observe(report_of(create), "hub")
    assert expect.behind(key, None)
    now[0] = expectations.WAIT
    assert not expect.behind(key, None)  # a watch that lost the event stalls nothing
    failed = plan.Report({create.key: plan.Outcome(create, ok=False, error="boom")})
    member = plan.Vertex("member1", plan.Action.CREATE, binding(None))
    expect.observe(failed, "hub")
    expect.observe(report_of(member), "hub")
    assert len(expect) == 0


def test_entries_past_their_wait_are_dropped_once_there_are_many() -> None:
    """Keys never reconciled again (a binding deleted with its template) do not stay for
    the life of the process: past PRUNE_AT entries, the expired ones go."""
    now = [0.0]
    expect = expectations.Expectations(lambda: now[0])
    old = [plan.Vertex("hub", plan.Action.CREATE, {**binding(None), "metadata": {
        "name": f"old-{n}", "namespace": "shop"}}) for n in range(expectations.PRUNE_AT)]
    expect.observe(report_of(*old), "hub")
    now[0] = expectations.WAIT
    expect.observe(report_of(plan.Vertex("hub", plan.Action.CREATE, binding(None))), "hub")
    assert len(expect) == 1
    assert expect.behind(expectations.object_key(binding(None)), None)
