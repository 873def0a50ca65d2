"""BindingRecord: the typed ResourceBinding writes exactly what the 12-parameter writer
wrote, reads what earlier versions wrote, and refuses a malformed or unknown field by
name."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.hub import api, bindings, status
from federation.placement import decision as decision_

JSON = dict[str, Any]


# -- the writer as it was (the oracle): bindings.binding() before the record replaced it ---


def _old_aggregated(copies: Mapping[str, Mapping[str, Any] | None], failed: Mapping[str, str],
                    unreachable: Mapping[str, str]) -> list[JSON]:
    entries = []
    for cluster in sorted(set(copies) | set(failed) | set(unreachable)):
        copy = copies.get(cluster)
        error = failed.get(cluster) or unreachable.get(cluster)
        entry: JSON = {"cluster": cluster, "applied": error is None and copy is not None,
                       "health": status.health(copy) if error is None else "Unknown"}
        if error:
            entry["error"] = error[:1024]
        if copy is not None and copy.get("status"):
            entry["status"] = {k: v for k, v in copy["status"].items() if k != "conditions"}
        entries.append(entry)
    return entries


def old_binding(template: Mapping[str, Any], policy: str | None, placed: Mapping[str, int],
                decision: decision_.Decision | None, conditions: Sequence[JSON],
                copies: Mapping[str, Mapping[str, Any] | None], failed: Mapping[str, str],
                unreachable: Mapping[str, str], pending: Sequence[str],
                deleted: bool = False,
                groups: tuple[str | None, str | None] = (None, None),
                extra: Mapping[str, Any] | None = None) -> JSON:
    """``bindings.binding`` as of commit ab69343, verbatim but for the helpers' names."""
    meta = template["metadata"]
    resource = bindings.binding_resource(template)
    obj: JSON = {"apiVersion": resource.api_version, "kind": resource.kind,
                 "metadata": {"name": bindings.name_of(template),
                              "labels": {api.BINDING_LABEL: str(template["kind"]).lower()}}}
    if meta.get("namespace"):
        obj["metadata"]["namespace"] = meta["namespace"]
    spec: JSON = {
        "resource": {k: v for k, v in (("apiVersion", template.get("apiVersion")),
                                       ("kind", template.get("kind")),
                                       ("namespace", meta.get("namespace")),
                                       ("name", meta.get("name")), ("uid", meta.get("uid")))
                     if v},
        "templateDeleted": deleted,
        "pendingCleanup": list(pending),
        "clusters": [{"name": n, "replicas": r} for n, r in placed.items()],
    }
    if bindings.orphaned(template):
        spec["orphan"] = True
    if policy is not None:
        spec["policy"] = policy
    if any(groups):
        spec[bindings.AFFINITY_GROUPS] = {key: value for key, value in
                                          zip(("affinityGroup", "antiAffinityGroup"), groups,
                                              strict=True) if value}
    spec.update(extra or {})
    if decision is not None:
        spec["replicas"] = decision.replicas
        spec["summary"] = bindings.summary(decision)
        spec["explanation"] = list(decision.explanation)
        if decision.pending:
            spec["pendingReplicas"] = decision.pending
    obj["spec"] = spec
    obj["status"] = {"conditions": list(conditions),
                     "aggregatedStatus": _old_aggregated(copies, failed, unreachable)}
    return obj


def new_binding(template: Mapping[str, Any], policy: str | None, placed: Mapping[str, int],
                decision: decision_.Decision | None, conditions: Sequence[JSON],
                copies: Mapping[str, Mapping[str, Any] | None], failed: Mapping[str, str],
                unreachable: Mapping[str, str], pending: Sequence[str],
                deleted: bool = False,
                groups: tuple[str | None, str | None] = (None, None),
                extra: Mapping[str, Any] | None = None) -> JSON:
    """The same inputs through the record, as the propagation reconciler builds it."""
    record = bindings.BindingRecord(
        resource=bindings.TemplateRef.of(template), template_deleted=deleted,
        pending_cleanup=tuple(pending),
        clusters=tuple(bindings.Placed(n, r) for n, r in placed.items()),
        orphan=bindings.orphaned(template), policy=policy, groups=groups,
        behaviour=bindings.Behaviour.from_obj(extra or {}),
        decided=bindings.Decided.of(decision) if decision is not None else None,
        conditions=tuple(conditions),
        aggregated=bindings.aggregated(copies, failed, unreachable))
    return bindings.binding_for(template, record)


def same_bytes(a: JSON, b: JSON) -> bool:
    """Equal as JSON text, key order included: what goes over the wire is the same."""
    return json.dumps(a) == json.dumps(b)


# -- the table -------------------------------------------------------------------------------


def deployment(name: str = "web", namespace: str | None = "shop", uid: str | None = "uid-1",
               **annotations: str) -> JSON:
    meta: JSON = {"name": name, "annotations": annotations}
    if namespace:
        meta["namespace"] = namespace
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def workload_copy(ready: int, **extra: Any) -> JSON:
    return {"kind": "Deployment", "metadata": {"generation": 1}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "readyReplicas": ready, **extra}}


CONDITION = status.condition("Scheduled", True, "Scheduled", "placed member1=2", (),
                             at=datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC))
DIVIDED = decision_.Decision(3, clusters={"member1": 2, "member2": 1},
                             explanation=("member1: weight 2", "member2: weight 1"), pending=1)
NAMES_ONLY = decision_.Decision(0, clusters={"member1": 0, "member2": 0})
EVERY_EXTRA: JSON = {
    "dependencies": ["ConfigMap/c", "Secret/s"], "awaitedDependencies": ["ConfigMap/later"],
    "preserveResourcesOnDeletion": True,
    "activation": {"policy": "PropagationPolicy shop/p", "template": "d1",
                   "spec": {"placement": {}}},
    "suspension": {"dispatching": True},
    "configHeld": [{"cluster": "member1", "kind": "ConfigMap", "name": "c", "policy": "r"}],
    "whenUnclaimed": "Keep"}

CASES: list[tuple[str, tuple[Any, ...], JSON]] = [
    ("nothing placed, no policy",
     (deployment(), None, {}, None, [], {}, {}, {}, []), {}),
    ("a divided decision, every optional part",
     (deployment(**{api.ORPHAN_ANNOTATION: "true"}), "PropagationPolicy shop/web",
      DIVIDED.clusters, DIVIDED, [CONDITION],
      {"member1": workload_copy(2, replicas=2), "member2": workload_copy(0)},
      {}, {}, ["member3"]),
     {"groups": ("tier=web", "zone=a"), "extra": EVERY_EXTRA}),
    ("names only, anti-affinity only",
     (deployment(), "ClusterPropagationPolicy all", NAMES_ONLY.clusters, NAMES_ONLY, [],
      {"member1": None, "member2": {"kind": "ConfigMap"}}, {}, {}, []),
     {"groups": (None, "zone=a")}),
    ("a copy whose status is only conditions keeps an empty status",
     (deployment(), "p", {"member1": 2}, None, [],
      {"member1": {"kind": "Deployment", "status": {"conditions": [{"type": "x"}]}}},
      {}, {}, []), {}),
    ("failures: a long error is cut, an empty one is no error but no success either",
     (deployment(), "p", {"member1": 1, "member2": 1, "member3": 1}, None, [],
      {"member1": workload_copy(2)}, {"member1": "x" * 2000, "member2": ""},
      {"member3": "unreachable"}, []), {}),
    ("a cluster-scoped template, no UID, an odd name",
     (deployment(name="Web_App.v2", namespace=None, uid=None), None, {}, None, [], {}, {},
      {}, ["member2", "member1"]), {}),
    ("a deleted template's leftover",
     (deployment(uid="old"), None, {}, None, [], {}, {}, {}, ["member2"]),
     {"deleted": True}),
    ("an orphan annotation that is not 'true' is no orphan",
     (deployment(**{api.ORPHAN_ANNOTATION: "yes"}), "p", {"member1": 0}, None, [], {}, {},
      {}, []), {"extra": {"whenUnclaimed": "Keep"}}),
    ("a zero decision with an error explanation",
     (deployment(), "p", {}, decision_.Decision(5, explanation=("no cluster fits",),
                                                error="unschedulable"),
      [CONDITION], {}, {}, {}, []), {}),
]


@pytest.mark.parametrize(("inputs", "options"), [(c[1], c[2]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_the_record_writes_byte_for_byte_what_the_old_writer_wrote(
        inputs: tuple[Any, ...], options: JSON) -> None:
    """For the same inputs, binding_for(template, record) is the old binding() object, key
    order included: the write budget and what the server stores do not change."""
    old, new = old_binding(*inputs, **options), new_binding(*inputs, **options)
    assert same_bytes(new, old), (new, old)
    assert bindings.same_record(old, new)


_name = st.sampled_from(["member1", "member2", "member3", "m-4"])
_text = st.text(max_size=30)


@st.composite
def writer_inputs(draw: st.DrawFn) -> tuple[tuple[Any, ...], JSON]:
    clusters = draw(st.dictionaries(_name, st.integers(0, 50), max_size=4))
    decision = draw(st.none() | st.builds(
        decision_.Decision, st.integers(0, 100), st.just(clusters), st.integers(0, 5),
        st.just(0), st.lists(_text, max_size=3).map(tuple)))
    copies = draw(st.dictionaries(_name, st.none() | st.builds(
        workload_copy, st.integers(0, 3)), max_size=3))
    failed = draw(st.dictionaries(_name, _text, max_size=2))
    unreachable = draw(st.dictionaries(_name, _text, max_size=2))
    template = deployment(draw(st.sampled_from(["web", "a.b", "X_y"])),
                          draw(st.sampled_from(["shop", None])),
                          draw(st.sampled_from(["u", None])),
                          **draw(st.sampled_from([{}, {api.ORPHAN_ANNOTATION: "true"}])))
    extra = {key: value for key, value in EVERY_EXTRA.items() if draw(st.booleans())}
    inputs = (template, draw(st.none() | _text), clusters, decision,
              draw(st.lists(st.just(CONDITION), max_size=1)), copies, failed, unreachable,
              draw(st.lists(_name, max_size=3, unique=True)))
    groups = (draw(st.none() | _text), draw(st.none() | _text))
    return inputs, {"deleted": draw(st.booleans()), "groups": groups, "extra": extra}


@settings(max_examples=100, deadline=None)
@given(writer_inputs())
def test_any_writer_input_gives_the_same_bytes(case: tuple[tuple[Any, ...], JSON]) -> None:
    """Random inputs (empty strings, zero replicas, names-only decisions, no UID...): the
    record's object is the old writer's, and reading it back gives the record again."""
    inputs, options = case
    old, new = old_binding(*inputs, **options), new_binding(*inputs, **options)
    assert same_bytes(new, old)
    assert bindings.BindingRecord.of(new).to_obj() == {"spec": new["spec"],
                                                        "status": new["status"]}


# -- reading ---------------------------------------------------------------------------------


def written() -> JSON:
    return new_binding(*CASES[1][1], **CASES[1][2])


def test_the_writers_object_round_trips_unchanged() -> None:
    """from_obj then to_obj gives back exactly the spec and status written."""
    obj = written()
    record = bindings.BindingRecord.of(obj)
    assert same_bytes(record.to_obj(), {"spec": obj["spec"], "status": obj["status"]})
    assert record.resource == bindings.TemplateRef("apps/v1", "Deployment", "shop", "web",
                                                   "uid-1")
    assert record.clusters == (bindings.Placed("member1", 2), bindings.Placed("member2", 1))
    assert record.pending_cleanup == ("member3",) and record.holders() == [
        "member1", "member2", "member3"]
    assert record.orphan is True and record.template_deleted is False
    assert record.policy == "PropagationPolicy shop/web"
    assert record.groups == ("tier=web", "zone=a")
    assert record.behaviour.dependencies == ("ConfigMap/c", "Secret/s")
    assert record.behaviour.when_unclaimed == "Keep"
    assert record.decided == bindings.Decided(3, "member1=2,member2=1",
                                              ("member1: weight 2", "member2: weight 1"), 1)


def test_a_record_round_trips_through_its_object() -> None:
    """to_obj then from_obj gives back an equal record, defaults and all."""
    for record in (bindings.BindingRecord(),
                   bindings.BindingRecord(bindings.TemplateRef("v1", "ConfigMap", name="c"),
                                          template_deleted=True,
                                          pending_cleanup=("member2", "member1"),
                                          clusters=(bindings.Placed("member1"),),
                                          policy="no policy", left_before_deletion=(),
                                          behaviour=bindings.Behaviour(activation={"a": 1}),
                                          aggregated=(bindings.CopyState(
                                              "member1", False, "Unknown", "down", {}),))):
        assert bindings.BindingRecord.from_obj(record.to_obj()) == record


def test_an_absent_binding_or_spec_is_the_empty_record() -> None:
    """No binding, or one without a spec or status, reads as nothing recorded."""
    assert bindings.BindingRecord.of(None) == bindings.BindingRecord()
    assert bindings.BindingRecord.of({"metadata": {"name": "x"}}) == bindings.BindingRecord()


def test_what_earlier_versions_wrote_is_read() -> None:
    """Before the one-record binding, a live template's pending clean-up was in the status
    and a decision-less binding had no clusters; before leftBeforeDeletion, a deleted
    binding had none: all still read (the pending clusters are still pending)."""
    old = {"spec": {"resource": {"kind": "ConfigMap", "name": "c"}, "templateDeleted": False,
                    "policy": "PropagationPolicy shop/p"},
           "status": {"conditions": [], "pendingCleanup": ["member2", "member1"],
                      "aggregatedStatus": []}}
    record = bindings.BindingRecord.of(old)
    assert record.pending() == ["member1", "member2"] and record.clusters == ()
    assert record.left_before_deletion is None and record.decided is None
    both = {"spec": {"pendingCleanup": ["member1"]}, "status": {"pendingCleanup": ["member1",
                                                                                   "member3"]}}
    assert bindings.BindingRecord.of(both).pending_cleanup == ("member1", "member3")
    # Rewritten, the list moves to the spec and leaves the status.
    assert record.to_obj()["spec"]["pendingCleanup"] == ["member2", "member1"]
    assert "pendingCleanup" not in record.to_obj()["status"]


def test_an_unknown_field_is_refused_not_kept_or_dropped() -> None:
    """Every field the writer writes is typed, so an unknown one was written by someone
    else (or a newer version): refused by name, so the record is neither acted on nor
    overwritten (keeping it verbatim would be accepting it; dropping it, losing it)."""
    for obj, field in (({"spec": {"clusterz": []}}, "spec has unknown field 'clusterz'"),
                       ({"status": {"phase": "x"}}, "status has unknown field 'phase'"),
                       ({"spec": {bindings.AFFINITY_GROUPS: {"group": "a"}}},
                        "unknown field 'group'")):
        with pytest.raises(bindings.BindingError, match=field):
            bindings.BindingRecord.from_obj(obj)
    assert bindings.read({"spec": {"clusterz": []}}) is None


@pytest.mark.parametrize(("spec", "field"), [
    ("a string", "spec is not an object"),
    ({"templateDeleted": "yes"}, "spec.templateDeleted"),
    ({"pendingCleanup": "member2"}, "spec.pendingCleanup"),
    ({"pendingCleanup": [["member2"]]}, "spec.pendingCleanup[]"),
    ({"clusters": {"name": "member1"}}, "spec.clusters"),
    ({"clusters": [{"name": "member1", "replicas": "2"}]}, "spec.clusters[].replicas"),
    ({"clusters": [{"name": "member1", "replicas": -1}]}, "spec.clusters[].replicas"),
    ({"clusters": [{"name": "member1", "replicas": True}]}, "spec.clusters[].replicas"),
    ({"clusters": [{"replicas": 1}]}, "spec.clusters[] has no name"),
    ({"clusters": [{"name": "member1", "weight": 1}]}, "unknown field 'weight'"),
    ({"resource": ["v1"]}, "spec.resource"),
    ({"resource": {"name": 7}}, "spec.resource.name"),
    ({"resource": {"name": "c", "selfLink": "x"}}, "unknown field 'selfLink'"),
    ({"orphan": "true"}, "spec.orphan"),
    ({"policy": {"name": "p"}}, "spec.policy"),
    ({"dependencies": "ConfigMap/c"}, "spec.dependencies"),
    ({"activation": "Lazy"}, "spec.activation"),
    ({"configHeld": [{"cluster": "member2"}]}, "spec.configHeld[] has no kind"),
    ({"leftBeforeDeletion": "member2"}, "spec.leftBeforeDeletion"),
    ({"replicas": "3"}, "spec.replicas"),
])
def test_a_malformed_field_is_refused_by_name(spec: Any, field: str) -> None:
    """Each wrong shape raises BindingError: one line, naming the field, quoting no value."""
    with pytest.raises(bindings.BindingError) as caught:
        bindings.BindingRecord.from_obj({"spec": spec})
    message = str(caught.value)
    assert field in message and "\n" not in message
    assert "member2" not in message and "'2'" not in message and "Lazy" not in message


@pytest.mark.parametrize(("state", "field"), [
    ({"conditions": "Ready"}, "status.conditions"),
    ({"conditions": ["Ready"]}, "status.conditions[]"),
    ({"aggregatedStatus": [{"cluster": "m", "applied": "yes"}]},
     "status.aggregatedStatus[].applied"),
    ({"aggregatedStatus": [{"cluster": "m", "secret": "x"}]}, "unknown field 'secret'"),
])
def test_a_malformed_status_is_refused_by_name(state: JSON, field: str) -> None:
    with pytest.raises(bindings.BindingError, match=field.replace("[", r"\[").replace(
            "]", r"\]")):
        bindings.BindingRecord.from_obj({"status": state})


def test_the_readers_answers() -> None:
    """owned_by: the live template of the UID (either side without one matches); a deleted
    record places nothing; records: the template's kind and name."""
    live = bindings.BindingRecord(bindings.TemplateRef(kind="ConfigMap", name="c", uid="u"),
                                  clusters=(bindings.Placed("member1", 2),))
    assert live.owned_by("u") and live.owned_by(None) and not live.owned_by("other")
    assert live.placements() == {"member1": 2} and live.records("ConfigMap", "c")
    assert not live.records("Secret", "c")
    gone = bindings.BindingRecord(live.resource, template_deleted=True,
                                  clusters=live.clusters)
    assert not gone.owned_by("u") and gone.placements() == {}
    assert gone.decision() == {"member1": 2}


def test_same_record_ignores_members_status_fields_and_messages() -> None:
    """Only what anyone acts on causes a write (the write budget)."""
    obj = written()
    moved = json.loads(json.dumps(obj))
    moved["status"]["aggregatedStatus"][0]["status"]["readyReplicas"] = 0
    moved["status"]["conditions"][0]["message"] = "something else"
    assert bindings.same_record(obj, moved)
    moved["spec"]["pendingCleanup"] = []
    assert not bindings.same_record(obj, moved)
    assert not bindings.same_record(None, obj)
    relabelled = {**obj, "metadata": {**obj["metadata"], "labels": {}}}
    assert not bindings.same_record(relabelled, obj)
    assert not bindings.same_record({**obj, "spec": "garbage"}, obj)


def test_replaced_keeps_the_objects_identity() -> None:
    """A record written over a cached binding keeps its metadata (the version a PUT needs)."""
    cached = {**written(), "metadata": {"name": "web-deployment", "resourceVersion": "7"}}
    emptied = bindings.replaced(cached, bindings.BindingRecord())
    assert emptied["metadata"] == cached["metadata"]
    assert bindings.BindingRecord.of(emptied) == bindings.BindingRecord()


def test_drift_reverts_round_trip_and_a_bad_count_is_named() -> None:
    """status.driftReverts is read back as written; one that is not a count is refused
    by name (the binding's other fields are never acted on half-read)."""
    record = bindings.BindingRecord(drift_reverts=(("member1", 2),))
    obj = {"spec": record.spec_obj(), "status": record.status_obj()}
    assert obj["status"]["driftReverts"] == {"member1": 2}
    assert bindings.BindingRecord.from_obj(obj).drift_reverts == (("member1", 2),)
    assert record.reverted({"member1": 1, "member2": 1}, ["member1", "member2"]) == \
        (("member1", 3), ("member2", 1))
    assert record.reverted({}, ["member2"]) == ()  # the workload left member1
    obj["status"]["driftReverts"] = {"member1": -1}
    with pytest.raises(bindings.BindingError, match=r"driftReverts\.member1"):
        bindings.BindingRecord.from_obj(obj)


def _served(obj: JSON, uid: str, version: str) -> JSON:
    """``obj`` as the server returns it: with a uid and a resourceVersion."""
    return {**obj, "metadata": {**obj.get("metadata", {}), "uid": uid,
                                "resourceVersion": version}}


def test_cached_records_are_parsed_once_per_version_and_follow_a_new_version() -> None:
    """The memo of cached bindings answers the same version with the same record (parsed
    once), and a new version (the server changes resourceVersion on every write) with the
    new record: a cached answer never outlives the version it was read from."""
    first = _served(written(), "uid-memo", "10")
    record = bindings.cached(first)
    assert record == bindings.BindingRecord.of(first)
    assert bindings.cached(json.loads(json.dumps(first))) is record  # same version: memo
    changed = json.loads(json.dumps(first))
    changed["spec"]["pendingCleanup"] = []
    changed["metadata"]["resourceVersion"] = "11"
    newer = bindings.cached(changed)
    assert newer.pending_cleanup == () and record.pending_cleanup == ("member3",)
    assert bindings.cached(None) == bindings.BindingRecord()


def test_cached_records_raise_for_an_unreadable_version_every_time() -> None:
    """An unreadable binding raises on every read (errors are not memoised), and its fixed
    version reads."""
    broken = _served({**written(), "spec": "garbage"}, "uid-broken", "5")
    for _ in range(2):
        with pytest.raises(bindings.BindingError):
            bindings.cached(broken)
    assert bindings.cached(_served(written(), "uid-broken", "6")).orphan is True


def test_same_record_compares_with_the_cached_version_it_is_given() -> None:
    """same_record reads the cached binding through the memo: after the cache moves to a
    new version, the comparison is with that version, not a remembered one."""
    old = _served(written(), "uid-same", "1")
    wanted = json.loads(json.dumps(written()))
    assert bindings.same_record(old, wanted)
    moved = json.loads(json.dumps(old))
    moved["spec"]["pendingCleanup"] = []
    moved["metadata"]["resourceVersion"] = "2"
    assert not bindings.same_record(moved, wanted)
    assert bindings.same_record(old, wanted)
