"""BindingRecord: the typed ResourceBinding spec round-trips what the writer writes and
refuses a malformed field by name."""

from __future__ import annotations

from typing import Any

import pytest

from federation.hub import bindings, records
from federation.placement import decision as decision_


def template(**annotations: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "uid-1",
                         "annotations": annotations}}


def written_spec(**annotations: str) -> dict[str, Any]:
    """The spec :func:`bindings.binding` writes with every optional part present."""
    decision = decision_.Decision(clusters={"member1": 2, "member2": 1}, replicas=3,
                                  explanation=("member1: weight 2",), pending=1)
    obj = bindings.binding(template(**annotations), "PropagationPolicy shop/web",
                           {"member1": 2, "member2": 1}, decision, [], {}, {}, {},
                           ["member3"], groups=("tier=web", None),
                           extra={"dependencies": [{"kind": "ConfigMap", "name": "c"}],
                                  "whenUnclaimed": "Keep"})
    spec: dict[str, Any] = obj["spec"]
    return spec


def test_the_writers_spec_round_trips_unchanged() -> None:
    """from_obj then to_obj gives back exactly what the writer wrote, fields of other
    owners included."""
    spec = written_spec(**{"federation.io/orphan": "true"})
    record = bindings.BindingRecord.from_obj(spec)
    assert record.to_obj() == spec
    assert record.resource == bindings.TemplateRef("apps/v1", "Deployment", "shop", "web",
                                                   "uid-1")
    assert record.clusters == (bindings.Placed("member1", 2), bindings.Placed("member2", 1))
    assert record.pending_cleanup == ("member3",)
    assert record.orphan is True and record.template_deleted is False
    assert record.policy == "PropagationPolicy shop/web"
    assert set(record.others) == {"dependencies", "whenUnclaimed", records.AFFINITY_GROUPS,
                                  "replicas", "summary", "explanation", "pendingReplicas"}


def test_a_record_round_trips_through_its_object() -> None:
    """to_obj then from_obj gives back an equal record, defaults and all."""
    for record in (bindings.BindingRecord(),
                   bindings.BindingRecord(bindings.TemplateRef("v1", "ConfigMap", name="c"),
                                          template_deleted=True,
                                          pending_cleanup=("member2", "member1"),
                                          clusters=(bindings.Placed("member1"),),
                                          policy="no policy", others={"activation": "Lazy"})):
        assert bindings.BindingRecord.from_obj(record.to_obj()) == record


def test_an_absent_binding_or_spec_is_the_empty_record() -> None:
    """No binding, or one without a spec, reads as nothing recorded (as the raw readers did)."""
    assert bindings.BindingRecord.of(None) == bindings.BindingRecord()
    assert bindings.BindingRecord.of({"metadata": {"name": "x"}}) == bindings.BindingRecord()


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
])
def test_a_malformed_field_is_refused_by_name(spec: Any, field: str) -> None:
    """Each wrong shape raises BindingError: one line, naming the field, quoting no value."""
    with pytest.raises(bindings.BindingError) as caught:
        bindings.BindingRecord.from_obj(spec)
    message = str(caught.value)
    assert field in message and "\n" not in message
    assert "member2" not in message and "'2'" not in message
