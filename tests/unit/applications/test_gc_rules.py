"""The garbage-collect policy's ``rules``: each strategy on a real reconcile (a new
revision drops a component, then the Application is deleted), the tracker's decision per
strategy, and the attack: rules only ever spare objects, never make us delete one we did
not place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from federation.applications import model, policies, tracker
from federation.cli import cli
from federation.controllers.applications import prune
from tests.unit.applications.test_controller import MC, REQUEST, Clock, app, set_app, world
from tests.unit.controllers import fakes
from tests.unit.controllers.applications.fakes import FakeView, live_copy

__all__ = ["world"]  # the fixture


def with_configs(rules: list[dict[str, Any]]) -> dict[str, Any]:
    body = app()
    body["spec"]["workflow"] = {"steps": [{"name": "all", "type": "deploy",
                                           "properties": {"policies": ["canary", "rest"]}}]}
    for name in ("upd", "del", "nev", "orph"):
        body["spec"]["components"].append({"name": name, "type": "config",
                                           "properties": {"data": {"a": "b"}}})
    body["spec"]["policies"].append({"name": "gc", "type": "garbage-collect",
                                     "properties": {"rules": rules}})
    return body


RULES = [{"selector": {"resourceNames": ["del"]}, "strategy": "onAppDelete"},
         {"selector": {"componentNames": ["nev"]}, "strategy": "never"},
         {"selector": {"resourceTypes": ["ConfigMap"], "resourceNames": ["orph"]},
          "propagation": "orphan"},
         {"selector": {"resourceTypes": ["ConfigMap"]}, "propagation": "cascading"}]


def present(mc: MC, name: str) -> bool:
    return all(mc.find(m, "ConfigMap", name, "shop") is not None for m in fakes.MEMBERS)


def absent(mc: MC, name: str) -> bool:
    return not any(mc.find(m, "ConfigMap", name, "shop") is not None for m in fakes.MEMBERS)


async def test_each_strategy_over_a_new_revision_and_the_deletion(
        world: tuple[MC, Any, Clock]) -> None:
    mc, reconciler, _ = world
    body = with_configs(RULES)
    set_app(mc, body)
    await reconciler.reconcile(REQUEST)
    assert all(present(mc, name) for name in ("upd", "del", "nev", "orph"))
    body["spec"]["components"] = body["spec"]["components"][:1]  # a release without them
    set_app(mc, body)
    await reconciler.reconcile(REQUEST)
    assert absent(mc, "upd")  # onAppUpdate (cascading): deleted once no longer rendered
    assert present(mc, "del") and present(mc, "nev") and present(mc, "orph")
    spec = mc.find("hub", "ResourceTracker", "shop", "shop")["spec"]  # type: ignore[index]
    tracked = {(e["name"], e.get("gc", "")) for e in spec["resources"]}
    assert ("del", "onAppDelete") in tracked  # still tracked: deleted with the Application
    assert not {n for n, _ in tracked} & {"nev", "orph"}  # released: ours no more to delete
    del mc.objects[("hub", "applications", "shop", "shop")]
    assert await reconciler.reconcile(REQUEST) is None
    assert absent(mc, "del") and mc.find("member1", "Deployment", "web", "shop") is None
    assert present(mc, "nev") and present(mc, "orph")  # never deleted by us
    assert mc.find("hub", "ResourceTracker", "shop", "shop") is None


async def test_never_survives_the_deletion_while_still_rendered(
        world: tuple[MC, Any, Clock]) -> None:
    mc, reconciler, _ = world
    set_app(mc, with_configs(RULES))
    await reconciler.reconcile(REQUEST)
    del mc.objects[("hub", "applications", "shop", "shop")]
    assert await reconciler.reconcile(REQUEST) is None
    assert absent(mc, "upd") and absent(mc, "del")
    assert present(mc, "nev") and present(mc, "orph")


def diff_of(entry: tracker.Entry) -> tracker.Diff:
    return tracker.diff([entry], {("member1", "all"): []})


def test_the_tracker_decides_per_recorded_strategy() -> None:
    base = tracker.Entry("member1", "v1", "ConfigMap", "shop", "x", 1, "all")
    assert diff_of(base).delete == (base,)
    cascading = tracker.Entry("member1", "v1", "ConfigMap", "shop", "x", 1, "all", "",
                              "cascading")
    assert diff_of(cascading).delete == (cascading,)
    kept = tracker.Entry("member1", "v1", "ConfigMap", "shop", "x", 1, "all", "onAppDelete")
    assert diff_of(kept).keep == (kept,) and diff_of(kept).delete == ()
    for released in (tracker.Entry("member1", "v1", "ConfigMap", "shop", "x", 1, "all",
                                   "never"),
                     tracker.Entry("member1", "v1", "ConfigMap", "shop", "x", 1, "all", "",
                                   "orphan")):
        assert diff_of(released).release == (released,) and diff_of(released).delete == ()


def test_the_strategy_is_recorded_when_written_and_read_back() -> None:
    gc = policies.gc_of([model.PolicySpec(name="gc", type="garbage-collect",
                                          properties={"rules": RULES})])
    manifests = [({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "shop",
                                "labels": {"app.oam.dev/component": name}}}, 1)
                 for name in ("upd", "del", "nev", "orph")]
    written = tracker.diff([], {("member1", "all"): manifests}, strategy=gc.strategy).write
    recorded = {e.name: (e.gc, e.propagation) for e, _ in written}
    assert recorded == {"upd": ("", "cascading"), "del": ("onAppDelete", "cascading"),
                        "nev": ("never", "cascading"), "orph": ("", "orphan")}
    for entry, _ in written:
        assert tracker.Entry.from_json(entry.as_json()) == entry


def test_a_forged_strategy_in_a_tracker_reads_as_the_default() -> None:
    """A tracker is the tenant's to write: an unknown value spares nothing and deletes
    nothing more than the default would."""
    entry = tracker.Entry.from_json({"cluster": "member1", "apiVersion": "v1",
                                     "kind": "ConfigMap", "namespace": "shop", "name": "x",
                                     "gc": "always-delete", "propagation": "Foreground"})
    assert (entry.gc, entry.propagation) == ("", "")


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"}}


async def test_rules_cannot_make_us_delete_what_we_did_not_place() -> None:
    """The attack: a tenant's rules select everything (``onAppUpdate``, ``cascading``),
    and its tracker names another Application's object and a member's own object with
    those strategies. Neither is deleted: the rules only spare, and the delete is still
    planned only for what this Application placed."""
    theirs = live_copy(config_map("theirs"), owner="other/app")
    members_own = config_map("members-own")
    view = FakeView([("member1", theirs), ("member1", members_own)])
    gc = policies.gc_of([model.PolicySpec(name="gc", type="garbage-collect", properties={
        "rules": [{"selector": {"resourceTypes": ["ConfigMap"]},
                   "strategy": "onAppUpdate", "propagation": "cascading"}]})])
    forged = [tracker.Entry("member1", "v1", "ConfigMap", "shop", name, 1, "all", gc_, prop)
              for name in ("theirs", "members-own")
              for gc_, prop in (("", "cascading"), ("onAppDelete", ""))]
    found = await prune.plan_removals(view, forged, "shop/shop")
    assert found.deletes == []
    diff = tracker.diff(forged[::2], {("member1", "all"): []}, strategy=gc.strategy)
    found = await prune.plan_removals(view, diff.delete, "shop/shop")
    assert found.deletes == [] and len(found.gone) == 2


async def test_a_released_object_of_ours_is_not_deleted() -> None:
    ours = live_copy(config_map("nev"))
    view = FakeView([("member1", ours)])
    entry = tracker.Entry("member1", "v1", "ConfigMap", "shop", "nev", 1, "all", "never")
    found = await prune.plan_removals(view, [entry], "shop/shop")
    assert found.deletes == [] and found.gone == [entry]
    plain = tracker.Entry("member1", "v1", "ConfigMap", "shop", "nev", 1, "all")
    assert len((await prune.plan_removals(view, [plain], "shop/shop")).deletes) == 1


def test_dry_run_says_what_the_rules_do(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("""apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: shop}
spec:
  components:
  - {name: web, type: webservice, properties: {image: nginx}}
  - {name: cfg, type: config, properties: {data: {a: b}}}
  policies:
  - name: gc
    type: garbage-collect
    properties:
      rules:
      - {selector: {componentNames: [cfg]}, strategy: never}
      - {selector: {resourceTypes: [Deployment]}, strategy: onAppDelete}
""")
    result = CliRunner().invoke(cli, ["app", "dry-run", "-f", str(path), "--local-cluster",
                                     "member1"])
    assert result.exit_code == 0, result.output
    assert result.output.count("# garbage-collect: ") == 2
    assert "# garbage-collect: kept when no longer rendered; deleted with the Application\n" \
        "apiVersion: apps/v1\nkind: Deployment" in result.output
    assert "# garbage-collect: never deleted: left in the member, untracked (its " \
        "dependents too) once no longer rendered or when the Application is deleted\n" \
        "apiVersion: v1\nkind: ConfigMap" in result.output
