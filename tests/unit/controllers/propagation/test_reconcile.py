"""The whole reconcile against an in-memory fleet and a recording writer: create, nothing
changed, delete, member down; the hub write budget; transformers cannot write (mypy)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mypy import api as mypy_api

from tests.unit.controllers.fakes import (
    MEMBERS,
    FakeMC,
    cluster_set,
    config_map,
    duplicated_policy,
    reconciler,
    request_for,
)


async def test_create_costs_one_hub_write_and_nothing_changed_costs_none() -> None:
    """A new duplicated ConfigMap: three member creates, one binding create (its status in
    the same request), no template write, no event; a second reconcile writes nothing."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("a", MEMBERS))
    template = mc.put("hub", config_map("a"))
    r = reconciler(mc)
    assert await r.reconcile(request_for(template)) is None
    assert mc.hub_writes() == [("create", "hub", "ResourceBinding/a-configmap")]
    assert {w[1] for w in mc.writes if w[2] == "ConfigMap/a"} == set(MEMBERS)
    binding = mc.find("hub", "ResourceBinding", "a-configmap", "shop")
    assert binding is not None
    conditions = {c["type"]: c["status"] for c in binding["status"]["conditions"]}
    assert conditions == {"Scheduled": "True", "Applied": "True", "Healthy": "True"}
    assert sorted(e["name"] for e in binding["spec"]["clusters"]) == list(MEMBERS)
    stored = mc.find("hub", "ConfigMap", "a", "shop")
    assert stored is not None and not stored["metadata"].get("finalizers")
    assert not (stored["metadata"].get("annotations") or {})
    assert r.recorder.events == []  # type: ignore[attr-defined]
    before = len(mc.writes)
    assert await r.reconcile(request_for(template)) is None
    assert mc.writes[before:] == []


async def test_template_gone_deletes_copies_then_its_binding() -> None:
    """No finalizer: the template's absence brings the reconcile to the binding, which says
    where the copies are; they go, then the binding."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("b", MEMBERS))
    template = mc.put("hub", config_map("b"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    del mc.objects[("hub", "configmaps", "shop", "b")]
    assert await r.reconcile(request_for(template)) is None
    assert all(mc.find(m, "ConfigMap", "b", "shop") is None for m in MEMBERS)
    assert mc.find("hub", "ResourceBinding", "b-configmap", "shop") is None


async def test_template_gone_with_a_member_down_leaves_the_record_to_cleanup() -> None:
    """member2 away: the others' copies go; the binding becomes templateDeleted with
    member2 pending and a CleanupPending condition (one hub write)."""
    mc = FakeMC(cluster_set(*MEMBERS))
    mc.put("hub", duplicated_policy("c", MEMBERS))
    template = mc.put("hub", config_map("c"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    del mc.objects[("hub", "configmaps", "shop", "c")]
    mc.set_down("member2", True)
    before = len(mc.hub_writes())
    assert await r.reconcile(request_for(template)) is None
    binding = mc.find("hub", "ResourceBinding", "c-configmap", "shop")
    assert binding is not None
    assert binding["spec"]["templateDeleted"] is True
    assert binding["spec"]["pendingCleanup"] == ["member2"]
    assert "CleanupPending" in {c["type"] for c in binding["status"]["conditions"]}
    assert len(mc.hub_writes()) - before == 1
    assert mc.find("member1", "ConfigMap", "c", "shop") is None


async def test_policy_change_moves_copies_and_records_the_new_decision() -> None:
    """Narrowing the policy to member1: the other copies are deleted; the binding records
    member1 alone; a Scheduled event says the decision changed (not a routine success)."""
    mc = FakeMC(cluster_set(*MEMBERS))
    policy = mc.put("hub", duplicated_policy("d", MEMBERS))
    template = mc.put("hub", config_map("d"))
    r = reconciler(mc)
    await r.reconcile(request_for(template))
    mc.put("hub", {**duplicated_policy("d", ("member1",)),
                   "metadata": {**policy["metadata"]}})
    assert await r.reconcile(request_for(template)) is None
    assert [m for m in MEMBERS if mc.find(m, "ConfigMap", "d", "shop")] == ["member1"]
    binding = mc.find("hub", "ResourceBinding", "d-configmap", "shop")
    assert binding is not None
    assert [e["name"] for e in binding["spec"]["clusters"]] == ["member1"]
    assert [e[1] for e in r.recorder.events] == ["Scheduled", "Applied"]  # type: ignore[attr-defined]


def test_mypy_rejects_a_transformer_that_writes(tmp_path: Path) -> None:
    """The context has no writer: a transformer reaching for one does not type-check."""
    snippet = tmp_path / "bad_transformer.py"
    snippet.write_text(textwrap.dedent("""
        from federation.controllers.propagation import Build, TransformContext, Verdict

        async def sneaky(ctx: TransformContext, build: Build) -> Verdict | None:
            await ctx._mc.cluster("member1").create({})
            await ctx.writer.create("member1", {})
            return None
    """))
    out, _, status = mypy_api.run([str(snippet), "--strict", "--no-incremental",
                                   "--follow-imports=silent"])
    assert status != 0
    assert '"TransformContext" has no attribute "_mc"' in out
    assert '"TransformContext" has no attribute "writer"' in out
