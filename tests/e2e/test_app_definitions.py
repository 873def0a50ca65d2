"""User definitions on the local fleet: KubeVela's own example ComponentDefinition and
TraitDefinitions (tests/fixtures/kubevela/definitions.yaml, Apache-2.0) applied to the
hub's vela-system; an Application using them delivers to two members through a deploy
step; changing the ComponentDefinition makes a new revision whose render reaches the
members; each spec of a definition is a DefinitionRevision, and ``type: name@v1`` keeps
rendering the first. Attacks: a tenant's own definition (or definition revision) is not
used, and a hostile parameter is refused while ``/healthz`` stays responsive.
"""

from __future__ import annotations

import copy
import functools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, healthz_seconds, wait_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kubevela" / "definitions.yaml"
APP_API = "core.oam.dev/v1beta1"


def kubevela_definitions() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(FIXTURE.read_text()) if d]


@pytest.fixture(scope="module")
def defs_plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[ControlPlane]:
    fleet_session.kubectl("hub", "create", "namespace", "vela-system", check=False)
    yield from running_plane(fleet_session, tmp_path_factory, "--cleanup-wait", "8")


@pytest.fixture
def ns(fleet: TestFleet, defs_plane: ControlPlane) -> Iterator[str]:
    yield from app_namespace(fleet, defs_plane, "defs")


def application(ns: str, component_type: str = "docs-worker",
                properties: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": APP_API, "kind": "Application",
        "metadata": {"name": "docs", "namespace": ns},
        "spec": {
            "components": [{
                "name": "backend", "type": component_type,
                "properties": properties or {"image": "busybox:1.36",
                                             "cmd": ["sleep", "3600"]},
                "traits": [{"type": "docs-sidecar",
                            "properties": {"name": "logger", "image": "busybox:1.36"}},
                           {"type": "kservice", "properties": {"http": {"web": 8080}}}]}],
            "policies": [{"name": "two", "type": "topology",
                          "properties": {"clusters": ["member1", "member2"]}}],
            "workflow": {"steps": [{"name": "deploy", "type": "deploy",
                                    "properties": {"policies": ["two"]}}]}}}


def app_status(fleet: TestFleet, ns: str) -> dict[str, Any]:
    found = get_or_none(fleet, "hub", "applications.core.oam.dev", "docs", "-n", ns) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def revisions(fleet: TestFleet, ns: str) -> list[str]:
    found = get_or_none(fleet, "hub", "applicationrevisions.core.oam.dev", "-n", ns) or {}
    return sorted(r["metadata"]["name"] for r in found.get("items") or [])


def deployment(fleet: TestFleet, member: str, ns: str) -> dict[str, Any] | None:
    return get_or_none(fleet, member, "deployment", "backend", "-n", ns)


def released(fleet: TestFleet, member: str, ns: str) -> bool:
    """The member's Deployment has the changed definition's label."""
    meta = (deployment(fleet, member, ns) or {}).get("metadata") or {}
    return bool((meta.get("labels") or {}).get("release") == "two")


def test_kubevelas_example_definitions_deliver_to_two_members_and_a_change_rolls_out(
        fleet: TestFleet, ns: str) -> None:
    defs = kubevela_definitions()
    apply(fleet, "hub", *defs)
    apply(fleet, "hub", application(ns))
    for member in ("member1", "member2"):
        found = wait_for(functools.partial(deployment, fleet, member, ns), timeout=90,
                         what=f"the Deployment in {member}")
        pod = found["spec"]["template"]
        assert [c["name"] for c in pod["spec"]["containers"]] == ["backend", "logger"]
        assert pod["metadata"]["labels"]["app"] == "backend"  # kservice's patch
        service = wait_for(functools.partial(get_or_none, fleet, member, "service",
                                             "backend", "-n", ns),
                           timeout=60, what=f"the Service in {member}")
        assert service["spec"]["ports"][0]["port"] == 8080
    assert revisions(fleet, ns) == ["docs-v1"]
    # the administrator changes the ComponentDefinition: a label in its template
    changed = copy.deepcopy(defs[0])
    template = changed["spec"]["schematic"]["cue"]["template"]
    changed["spec"]["schematic"]["cue"]["template"] = template.replace(
        "output: {", 'output: {\n  metadata: labels: release: "two"', 1)
    apply(fleet, "hub", changed)
    wait_for(lambda: revisions(fleet, ns) == ["docs-v1", "docs-v2"], timeout=60,
             what="a second revision")
    for member in ("member1", "member2"):
        wait_for(functools.partial(released, fleet, member, ns), timeout=90,
                 what=f"the new render in {member}")


def test_a_tenants_definition_is_not_used(fleet: TestFleet, ns: str) -> None:
    """Attack: a tenant writes a ComponentDefinition in its own namespace and names it in
    its Application: refused naming the type; nothing reaches a member."""
    mine = copy.deepcopy(kubevela_definitions()[0])
    mine["metadata"] = {"name": "mine", "namespace": ns}
    apply(fleet, "hub", mine, application(ns, "mine"))
    status = wait_for(lambda: app_status(fleet, ns).get("status") == "renderFailed" and
                      app_status(fleet, ns), timeout=60, what="renderFailed")
    message = status["conditions"][0]["message"]
    assert "'mine': the ComponentDefinition 'mine' in namespace" in message
    assert deployment(fleet, "member1", ns) is None


HOSTILE = """
parameter: n: [...int]
output: {
  apiVersion: "v1"
  kind: "ConfigMap"
  data: {for a in parameter.n for b in parameter.n for c in parameter.n {"\\(a)-\\(b)-\\(c)": "x"}}
}
"""


def test_a_hostile_parameter_is_refused_while_healthz_answers(
        fleet: TestFleet, ns: str, defs_plane: ControlPlane) -> None:
    """Attack: a tenant's parameter makes an administrator's template do unbounded work
    (a nested comprehension over its list): renderFailed with the evaluation's one line,
    and the control plane's ``/healthz`` answers quickly all along."""
    hostile = {"apiVersion": APP_API, "kind": "ComponentDefinition",
               "metadata": {"name": "cube", "namespace": "vela-system"},
               "spec": {"schematic": {"cue": {"template": HOSTILE}}}}
    body = application(ns, "cube", {"n": list(range(500))})
    body["spec"]["components"][0]["traits"] = []
    slowest: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            try:
                slowest.append(healthz_seconds(defs_plane.health_port, timeout=5.0))
            except (OSError, AssertionError):
                slowest.append(float("inf"))  # no answer within 5 s counts as frozen
            stop.wait(0.2)

    prober = threading.Thread(target=probe, name="healthz prober")
    prober.start()
    try:
        apply(fleet, "hub", hostile, body)
        status = wait_for(lambda: app_status(fleet, ns).get("status") == "renderFailed" and
                          app_status(fleet, ns), timeout=120, what="renderFailed")
    finally:
        stop.set()
        prober.join()
    message = status["conditions"][0]["message"]
    assert "ComponentDefinition vela-system/cube" in message
    assert "\n" not in message
    assert slowest and max(slowest) < 2.0


def greeter(name: str, greeting: str) -> dict[str, Any]:
    template = ('parameter: {}\noutput: {apiVersion: "v1", kind: "ConfigMap", '
                f'data: greeting: "{greeting}"}}')
    return {"apiVersion": APP_API, "kind": "ComponentDefinition",
            "metadata": {"name": name, "namespace": "vela-system"},
            "spec": {"schematic": {"cue": {"template": template}}}}


def one_component(ns: str, app: str, component_type: str) -> dict[str, Any]:
    return {"apiVersion": APP_API, "kind": "Application",
            "metadata": {"name": app, "namespace": ns},
            "spec": {"components": [{"name": app, "type": component_type}],
                     "policies": [{"name": "one", "type": "topology",
                                   "properties": {"clusters": ["member1"]}}]}}


def greeting(fleet: TestFleet, ns: str, name: str) -> str | None:
    found = get_or_none(fleet, "member1", "configmap", name, "-n", ns) or {}
    value = (found.get("data") or {}).get("greeting")
    return str(value) if value is not None else None


def test_a_type_at_v1_keeps_rendering_the_definitions_first_spec(
        fleet: TestFleet, ns: str) -> None:
    """A CUE ComponentDefinition applied, then changed: DefinitionRevisions ``-v1`` and
    ``-v2`` beside it in vela-system; an Application of ``name@v1`` delivers the first
    render, one of ``name`` the second. Attack: a DefinitionRevision the tenant writes in
    its own namespace is not used (renderFailed saying so, nothing delivered)."""
    name = f"greeter-{uuid.uuid4().hex[:6]}"
    try:
        apply(fleet, "hub", greeter(name, "old"))
        wait_for(lambda: get_or_none(fleet, "hub", "definitionrevisions.core.oam.dev",
                                     f"{name}-v1", "-n", "vela-system"),
                 timeout=60, what="revision 1")
        apply(fleet, "hub", greeter(name, "new"))
        second = wait_for(lambda: get_or_none(fleet, "hub", "definitionrevisions.core.oam.dev",
                                              f"{name}-v2", "-n", "vela-system"),
                          timeout=60, what="revision 2")
        assert second["spec"]["revision"] == 2
        wait_for(lambda: ((get_or_none(fleet, "hub", "componentdefinition", name, "-n",
                                       "vela-system") or {}).get("status") or {}).get(
            "latestRevision", {}).get("name") == f"{name}-v2", timeout=30,
            what="status.latestRevision")
        assert second["metadata"]["labels"]["componentdefinition.oam.dev/name"] == name
        evil = copy.deepcopy(second)
        evil["metadata"] = {"name": f"{name}-v9", "namespace": ns}
        evil["spec"]["componentDefinition"]["spec"] = greeter(name, "evil")["spec"]
        apply(fleet, "hub", one_component(ns, "pinned", f"{name}@v1"),
              one_component(ns, "latest", name), evil, one_component(ns, "evil", f"{name}@v9"))
        wait_for(lambda: greeting(fleet, ns, "pinned") == "old", timeout=90,
                 what="the pinned render in member1")
        wait_for(lambda: greeting(fleet, ns, "latest") == "new", timeout=90,
                 what="the latest render in member1")
        status = wait_for(lambda: (found := get_or_none(
            fleet, "hub", "applications.core.oam.dev", "evil", "-n", ns) or {}).get(
                "status", {}).get("status") == "renderFailed" and found["status"],
            timeout=60, what="renderFailed")
        assert f"(DefinitionRevision {name}-v9) is not used" in \
            status["conditions"][0]["message"]
        assert greeting(fleet, ns, "evil") is None
    finally:
        fleet.kubectl("hub", "delete", "componentdefinition", name, "-n", "vela-system",
                      "--wait=false", check=False)
        fleet.kubectl("hub", "delete", "definitionrevisions.core.oam.dev", "-n",
                      "vela-system", "-l", f"componentdefinition.oam.dev/name={name}",
                      "--wait=false", check=False)
