"""``applyStrategy.type: ServerSideApply`` on the local fleet, measured by member1's own
``apiserver_request_total``.

A controller in member1 takes our Deployment copy's replicas by server-side apply under a
field manager of its own (as an operator or an HPA owns a field): our copy's replicas stay
the member's, with not one write of ours. We still correct our own fields: a template
change lands (the member's replicas kept), and an annotation of ours edited in the member
is put back. The same sequence under ClientSideApply measures what each strategy writes.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import TestFleet, kubectl_binary
from tests.e2e.conftest import ControlPlane
from tests.e2e.helpers import apply, get_or_none, wait_for
from tests.e2e.test_write_budget import NOT_OURS, Key, breakdown, delta, mutating_requests

POLICY_API = "policy.federation.io/v1alpha1"
QUIET = 20
"""Seconds the member's controller's field must survive without a write of ours."""


@pytest.fixture
def ns(fleet: TestFleet, control_plane: ControlPlane) -> Iterator[str]:
    name = f"ssa-{uuid.uuid4().hex[:6]}"
    fleet.kubectl("hub", "create", "namespace", name)
    yield name
    if control_plane.process is not None and control_plane.process.poll() is not None:
        pytest.fail(f"fedctl run exited:\n{control_plane.log_tail()}")
    for kinds in ("deployments", "propagationpolicies.policy.federation.io"):
        fleet.kubectl("hub", "delete", kinds, "--all", "-n", name, "--wait=false", check=False)


def workload(ns: str, image: str, strategy: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": ns, "annotations": {"note": "hub"}},
         "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "web", "image": image}]}}}},
        {"apiVersion": POLICY_API, "kind": "PropagationPolicy",
         "metadata": {"name": "web", "namespace": ns},
         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                         "name": "web"}],
                  "placement": {"clusterAffinity": {"clusterNames": ["member1"]},
                                "replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
                  "applyStrategy": {"type": strategy}}},
    ]


def copy(fleet: TestFleet, ns: str) -> dict[str, Any]:
    return get_or_none(fleet, "member1", "deployment", "web", "-n", ns) or {}


def image(fleet: TestFleet, ns: str) -> Any:
    containers = (((copy(fleet, ns).get("spec") or {}).get("template") or {}).get("spec")
                  or {}).get("containers") or [{}]
    return containers[0].get("image")


def replicas(fleet: TestFleet, ns: str) -> Any:
    return (copy(fleet, ns).get("spec") or {}).get("replicas")


def note(fleet: TestFleet, ns: str) -> Any:
    return ((copy(fleet, ns).get("metadata") or {}).get("annotations") or {}).get("note")


def member_controller_scales(fleet: TestFleet, ns: str, to: int) -> None:
    """A member-side controller's write: server-side apply of spec.replicas alone, under
    its own field manager, taking the field (as an operator owning a field does)."""
    partial = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": to}}
    # --validate=false: kubectl would check the partial object alone against the schema
    # (selector and template are required); the server validates the merged object.
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", "member1",
         "apply", "--server-side", "--field-manager=member-scaler", "--force-conflicts",
         "--validate=false", "-f", "-"], input=json.dumps(partial), text=True,
        capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr


def deployment_writes(fleet: TestFleet, before: Counter[Key]) -> Counter[Key]:
    writes = delta(mutating_requests(fleet, "member1"), before)
    return Counter({key: n for key, n in writes.items()
                    if key[0] == "deployments" and key[1] == ""})


def settle(fleet: TestFleet, ns: str, want_image: str, seconds: float = 5) -> None:
    wait_for(lambda: image(fleet, ns) == want_image, timeout=60, what=f"image {want_image}")
    time.sleep(seconds)  # room for a write that must not come


def test_ssa_leaves_the_members_field_and_corrects_ours(fleet: TestFleet, ns: str) -> None:
    apply(fleet, "hub", *workload(ns, "nginx:1", "ServerSideApply"))
    wait_for(lambda: replicas(fleet, ns) == 4, timeout=60, what="copy with 4")
    before = mutating_requests(fleet, "member1")
    member_controller_scales(fleet, ns, 7)
    deadline = time.monotonic() + QUIET
    while time.monotonic() < deadline:
        assert replicas(fleet, ns) == 7, "the member controller's replicas were reverted"
        time.sleep(1)
    writes = deployment_writes(fleet, before)  # the controller's one apply, nothing of ours
    assert writes == Counter({("deployments", "", "APPLY", "200"): 1}), \
        f"writes to the copy in {QUIET}s: {breakdown(writes)}"

    apply(fleet, "hub", workload(ns, "nginx:2", "ServerSideApply")[0])
    settle(fleet, ns, "nginx:2")
    assert replicas(fleet, ns) == 7, "a template change took the member's replicas back"

    fleet.kubectl("member1", "annotate", "--overwrite", "deployment", "web", "-n", ns,
                  "note=edited", "--field-manager=someone")
    wait_for(lambda: note(fleet, ns) == "hub", timeout=30, what="our annotation put back")
    assert replicas(fleet, ns) == 7 and image(fleet, ns) == "nginx:2"


@pytest.mark.parametrize("strategy", ["ClientSideApply", "ServerSideApply"])
def test_what_each_strategy_writes(fleet: TestFleet, ns: str, strategy: str) -> None:
    """Member writes to one copy, by step: create, first template change, second change,
    and nothing while it is settled. Printed for docs/interpreter.md's table."""
    counts: dict[str, str] = {}
    before = mutating_requests(fleet, "member1")
    hub_before = mutating_requests(fleet, "hub")
    apply(fleet, "hub", *workload(ns, "nginx:1", strategy))
    for step, want in (("create", "nginx:1"), ("first change", "nginx:2"),
                       ("second change", "nginx:3"), ("settled", "nginx:3")):
        if step in ("first change", "second change"):
            apply(fleet, "hub", workload(ns, want, strategy)[0])
        settle(fleet, ns, want, 10 if step == "settled" else 5)
        now = mutating_requests(fleet, "member1")
        writes = deployment_writes(fleet, before)
        counts[step] = breakdown(writes)
        before = now
        total = sum(writes.values())
        expected = {"create": 1, "first change": 2 if strategy == "ServerSideApply" else 1,
                    "second change": 1, "settled": 0}[step]
        assert total == expected, f"{strategy} {step}: {breakdown(writes)}"
    hub = delta(mutating_requests(fleet, "hub"), hub_before, NOT_OURS)
    print(f"{strategy}: " + "; ".join(f"{k}: {v}" for k, v in counts.items())
          + f"; hub, all steps: {breakdown(hub)}")
