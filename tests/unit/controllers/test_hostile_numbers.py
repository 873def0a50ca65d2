"""Numbers on the hub that the strict placement models refuse never break a reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from federation.contexts.client import Resource
from federation.controllers import propagation
from federation.hub import capacity


def member(available: Any) -> dict[str, Any]:
    return {"metadata": {"name": "m1"}, "spec": {},
            "status": {"availableReplicas": available}}


@pytest.mark.parametrize("available", [True, False, -1, 2**31, 2**63, 1.5, "3"])
def test_a_bad_available_replicas_is_treated_as_no_estimate(available: Any) -> None:
    """One MemberCluster stating `availableReplicas: true` or 2**40 must not make every
    template's placement fail with a validation error: the estimate is ignored."""
    assert propagation.member_cluster(member(available), True).available_replicas is None


def test_a_good_available_replicas_is_kept() -> None:
    assert propagation.member_cluster(member(7), True).available_replicas == 7


@pytest.mark.parametrize("replicas", [2**31, True, 1.5])
def test_a_template_with_impossible_replicas_is_a_problem_not_a_crash(replicas: Any) -> None:
    """A custom resource can carry any `spec.replicas`: it becomes a Scheduled=False
    condition (InvalidTemplate), not an exception retried for ever."""
    template = {"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w", "namespace": "ns"}, "spec": {"replicas": replicas}}
    build = propagation.Build(template=template,
                              resource=Resource("example.com", "v1", "widgets", "Widget"),
                              hub="hub")
    if replicas is True or isinstance(replicas, float):
        # Not an integer: the engine reads it as no replicas (a replica-less kind).
        assert propagation.template_resource(build).replicas == 0
        return
    with pytest.raises(propagation.Problem) as caught:
        propagation.template_resource(build)
    assert caught.value.reason == "InvalidTemplate"
    assert "replicas" in str(caught.value)


def test_capacity_estimate_is_capped_at_int32() -> None:
    """A resource summary claiming petabytes free yields at most an int32 estimate."""
    summary = {"allocatable": {"cpu": "1000000000", "memory": "1E"},
               "allocated": {}}
    assert capacity.estimate(summary, {"cpu": 0.000001}) == 2**31 - 1
