"""vela-core's ``export-service`` and ``generate-jdbc-connection`` on the local fleet, with
the control plane's real identity.

`fedctl run` runs for the module with ``--export-service-allow 10.77.0.0/16`` and
``--app-local-cluster member1``; `fedctl install --export-service` grants the member role
Endpoints (without it the control plane has none).

- export-service writes the selector-less Service and its Endpoints (the one allowed
  address) to both members of the Application's topology, and the step succeeds; an
  address outside the flag's ranges is refused in the Application's status, naming the
  flag, and nothing is written; a tenant's own Endpoints (a ``k8s-objects`` manifest)
  stays refused by the deny list and never reaches a member.
- generate-jdbc-connection's ``env`` lands in the member's Deployment as secretKeyRefs of
  the connection Secret: the password (in that Secret in the member) is in neither the
  Application nor the Deployment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.conftest import TestFleet
from tests.e2e.conftest import ControlPlane, app_namespace, running_plane
from tests.e2e.helpers import apply, get_or_none, wait_for

PASSWORD = "e2e-jdbc-password-5"
MEMBERS = ("member1", "member2")
APPS = "applications.core.oam.dev"


@pytest.fixture(scope="module")
def plane(fleet_session: TestFleet, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[ControlPlane]:
    yield from running_plane(fleet_session, tmp_path_factory, "--app-local-cluster",
                             "member1", "--export-service-allow", "10.77.0.0/16")


@pytest.fixture
def ns(fleet: TestFleet, plane: ControlPlane) -> Iterator[str]:
    plane.install("--export-service")
    yield from app_namespace(fleet, plane, "export", *MEMBERS)


def application(ns: str, name: str, steps: list[dict[str, Any]],
                components: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"components": components or [],
                     "policies": [{"name": "both", "type": "topology",
                                   "properties": {"clusters": list(MEMBERS)}}],
                     "workflow": {"steps": steps}}}


def export(ip: str) -> dict[str, Any]:
    return {"name": "export", "type": "export-service",
            "properties": {"name": "db", "ip": ip, "port": 5432, "targetPort": 15432,
                           "topology": "both"}}


def app_of(fleet: TestFleet, ns: str, name: str) -> dict[str, Any]:
    return get_or_none(fleet, "hub", APPS, name, "-n", ns) or {}


def condition_messages(fleet: TestFleet, ns: str, name: str) -> str:
    status = app_of(fleet, ns, name).get("status") or {}
    return " | ".join(str(c.get("message") or "") for c in status.get("conditions") or [])


def test_export_service_writes_to_both_members_only_for_an_allowed_address(
        fleet: TestFleet, ns: str) -> None:
    apply(fleet, "hub", application(ns, "exported", [export("10.77.0.9")]))
    for member in MEMBERS:
        endpoints = wait_for(partial(get_or_none, fleet, member, "endpoints", "db", "-n", ns),
                             timeout=60, what=f"Endpoints db in {member}")
        assert endpoints["subsets"][0]["addresses"] == [{"ip": "10.77.0.9"}]
        service = get_or_none(fleet, member, "service", "db", "-n", ns)
        assert service is not None and "selector" not in service["spec"]
    wait_for(lambda: (app_of(fleet, ns, "exported").get("status") or {}).get("workflow", {})
             .get("phase") == "succeeded", timeout=60, what="the export succeeded")

    apply(fleet, "hub", application(ns, "outside", [export("10.99.0.1")]))
    wait_for(lambda: "--export-service-allow" in condition_messages(fleet, ns, "outside"),
             timeout=60, what="the refusal naming the flag in the status")
    assert "10.99.0.1 is outside the ranges" in condition_messages(fleet, ns, "outside")

    tenant = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "mine"},
              "subsets": [{"addresses": [{"ip": "10.77.0.10"}], "ports": [{"port": 80}]}]}
    apply(fleet, "hub", application(ns, "tenant", [
        {"name": "deploy", "type": "deploy", "properties": {"policies": ["both"]}}],
        [{"name": "ep", "type": "k8s-objects", "properties": {"objects": [tenant]}}]))
    wait_for(lambda: "deny list" in condition_messages(fleet, ns, "tenant"), timeout=60,
             what="the tenant's Endpoints refused by the deny list")
    for member in MEMBERS:
        assert get_or_none(fleet, member, "endpoints", "mine", "-n", ns) is None
        assert get_or_none(fleet, member, "service", "db", "-n", ns) is not None


def test_jdbc_env_reaches_the_deployment_as_secret_references(fleet: TestFleet,
                                                              ns: str) -> None:
    apply(fleet, "member1", {"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "db-conn", "namespace": ns},
                             "stringData": {"DB_HOST": "rm-1.example", "DB_PORT": "3306",
                                            "DB_NAME": "db1", "DB_USER": "oamtest",
                                            "DB_PASSWORD": PASSWORD}})
    server = {"name": "express-server", "type": "webservice",
              "properties": {"image": "crccheck/hello-world", "port": 8000}}
    apply(fleet, "hub", application(ns, "jdbc", [
        {"name": "jdbc", "type": "generate-jdbc-connection",
         "outputs": [{"name": "jdbc", "valueFrom": "env"}], "properties": {"name": "db-conn"}},
        {"name": "apply", "type": "apply-component",
         "inputs": [{"from": "jdbc", "parameterKey": "env"}],
         "properties": {"component": "express-server", "cluster": "member1"}}], [server]))
    deployment = wait_for(lambda: get_or_none(fleet, "member1", "deployment",
                                              "express-server", "-n", ns),
                          timeout=60, what="the Deployment in member1")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    for name, key in (("DB_HOST", "DB_HOST"), ("DB_PASSWORD", "DB_PASSWORD"),
                      ("username", "DB_USER"), ("password", "DB_PASSWORD")):
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": "db-conn", "key": key}
    assert env["url"]["value"] == \
        "jdbc://$(DB_HOST):$(DB_PORT)/$(DB_NAME)?characterEncoding=utf8&useSSL=false"
    app = app_of(fleet, ns, "jdbc")
    [jdbc_step] = [s for s in app["status"]["workflow"]["steps"] if s["name"] == "jdbc"]
    assert jdbc_step["phase"] == "succeeded"
    for said in (json.dumps(app), json.dumps(deployment)):
        assert PASSWORD not in said and "oamtest" not in said


def test_without_the_member_rule_nothing_is_exported(fleet: TestFleet, plane: ControlPlane,
                                                    ns: str) -> None:
    """The flag alone writes nothing: without `fedctl install --export-service` the member
    role has no Endpoints right, the write is forbidden and the step does not succeed."""
    plane.install()  # the member role as shipped: no Endpoints
    try:
        apply(fleet, "hub", application(ns, "ungranted", [export("10.77.0.11")]))
        wait_for(lambda: "forbidden" in condition_messages(fleet, ns, "ungranted").lower(),
                 timeout=60, what="the member's refusal in the status")
        for member in MEMBERS:
            assert get_or_none(fleet, member, "endpoints", "db", "-n", ns) is None
        phase = (app_of(fleet, ns, "ungranted").get("status") or {}).get("workflow", {}) \
            .get("phase")
        assert phase != "succeeded"
    finally:
        plane.install("--export-service")
