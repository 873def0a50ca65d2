"""The generated manifests: what a careful operator expects of a controller's Deployment,
selectors that agree, and a config/ tree equal to the generator's output."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation import __version__
from federation.commands import install, rbac
from federation.deploy import layout, manifests, tree
from federation.deploy.manifests import Options
from federation.rbac import roles
from federation.runtime import manager

ROOT = Path(__file__).resolve().parents[3]
JSON = dict[str, Any]


def by_kind(objects: list[JSON], kind: str) -> list[JSON]:
    return [o for o in objects if o["kind"] == kind]


@pytest.fixture(name="objects")
def fixture_objects() -> list[JSON]:
    return manifests.control_plane(Options(), tree.shipped_crds())


def pod_spec(deployment: JSON) -> JSON:
    spec: JSON = deployment["spec"]["template"]["spec"]
    return spec


def test_the_deployment_runs_two_replicas_with_leader_election() -> None:
    """Two replicas; --leader-elect with the lease flags spelled out and in order."""
    deployment = manifests.deployment(Options())
    args = pod_spec(deployment)["containers"][0]["args"]
    assert deployment["spec"]["replicas"] == 2
    assert args[0] == "run" and "--leader-elect" in args
    flags = dict(a.removeprefix("--").split("=", 1) for a in args if "=" in a)
    assert flags["leader-election-namespace"] == roles.Settings().leader_election_namespace
    assert flags["leader-election-id"] == roles.Settings().leader_election_id
    renew, lease = float(flags["leader-elect-renew-deadline"]), \
        float(flags["leader-elect-lease-duration"])
    assert 0 < float(flags["leader-elect-retry-period"]) < renew < lease


def test_shutdown_fits_in_the_termination_grace_period() -> None:
    """The kubelet's SIGKILL comes after the manager's bounded shutdown (Lease released)."""
    spec = pod_spec(manifests.deployment(Options()))
    grace = spec["terminationGracePeriodSeconds"]
    assert grace > manager.ManagerSettings().shutdown_timeout
    assert grace <= manager.ManagerSettings().shutdown_timeout + 10


def test_probes_health_and_secure_metrics() -> None:
    """Liveness /healthz and readiness /readyz on the --health-probe-bind-address port;
    metrics only over HTTPS."""
    container = pod_spec(manifests.deployment(Options()))["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert f"--health-probe-bind-address=:{ports['health']}" in container["args"]
    assert f"--metrics-bind-address=:{ports['metrics']}" in container["args"]
    assert "--metrics-secure" in container["args"]
    assert f"--work-bind-address=0.0.0.0:{ports['work']}" in container["args"]


def test_the_sharded_overlay_serves_the_pull_agents_on_every_replica() -> None:
    """config/overlays/sharded: N replicas of --shards N, each with the work port (every
    shard holder serves its agents; docs/runtime.md, "Pull members with shards")."""
    patch = manifests.sharded_patch(Options(shards=3))
    args = patch["spec"]["template"]["spec"]["containers"][0]["args"]
    assert patch["spec"]["replicas"] == 3 and "--shards=3" in args
    assert f"--work-bind-address=0.0.0.0:{manifests.WORK_PORT}" in args
    assert any(a.startswith("--work-hosts=") for a in args)


@pytest.mark.parametrize("deployment", [manifests.deployment(Options()),
                                        manifests.agent_deployment(Options())],
                         ids=["control-plane", "agent"])
def test_restricted_security_context(deployment: JSON) -> None:
    """Non-root 65532, read-only root, no privilege escalation, no capability, seccomp
    RuntimeDefault, for every container (init containers included)."""
    spec = pod_spec(deployment)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 65532
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"] and container["resources"]["limits"]


@pytest.mark.parametrize("deployment", [manifests.deployment(Options()),
                                        manifests.agent_deployment(Options())],
                         ids=["control-plane", "agent"])
def test_in_cluster_config_and_no_kubeconfig(deployment: JSON) -> None:
    """The ServiceAccount's token is the credential: no kubeconfig flag, variable or file."""
    spec = pod_spec(deployment)
    assert spec["automountServiceAccountToken"] is True
    assert spec["serviceAccountName"]
    text = yaml.safe_dump(deployment)
    assert "kubeconfig" not in text.lower() and "KUBECONFIG" not in text
    for volume in spec["volumes"]:
        assert set(volume) & {"emptyDir", "secret"}, volume  # no hostPath, no other mount


def test_the_image_is_this_version_and_kustomize_can_change_it() -> None:
    deployment = manifests.deployment(Options())
    assert pod_spec(deployment)["containers"][0]["image"] == \
        f"ghcr.io/federation/fedctl:{__version__}"
    default = yaml.safe_load(layout.files(Options(), [])["default/kustomization.yaml"])
    assert default["images"] == [{"name": "ghcr.io/federation/fedctl",
                                  "newName": "ghcr.io/federation/fedctl",
                                  "newTag": __version__}]


def test_pyproject_version_is_the_packages() -> None:
    """The image tag comes from federation.__version__: it must be pyproject's."""
    text = (ROOT / "pyproject.toml").read_text()
    assert f'\nversion = "{__version__}"\n' in text


def test_anti_affinity_by_hostname_selects_the_replicas() -> None:
    deployment = manifests.deployment(Options())
    term = pod_spec(deployment)["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def test_services_pdb_network_policy_and_monitor_select_the_pods(objects: list[JSON]) -> None:
    """Every selector matches the Deployment's pod labels, and every Service port names a
    container port."""
    deployment = by_kind(objects, "Deployment")[0]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selects(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    ports = {p["name"] for p in pod_spec(deployment)["containers"][0]["ports"]}
    services = by_kind(objects, "Service")
    assert {s["metadata"]["name"] for s in services} == {manifests.METRICS_SERVICE,
                                                       manifests.WORK_SERVICE}
    for service in services:
        assert selects(service["spec"]["selector"], pod_labels)
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    pdb = by_kind(objects, "PodDisruptionBudget")[0]
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels)
    assert pdb["spec"]["minAvailable"] == 1 < deployment["spec"]["replicas"]
    policy = by_kind(objects, "NetworkPolicy")[0]
    assert selects(policy["spec"]["podSelector"]["matchLabels"], pod_labels)
    opened = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert opened == {manifests.METRICS_PORT, manifests.WORK_PORT}
    monitor = manifests.service_monitor(Options())
    metrics = next(s for s in services if s["metadata"]["name"] == manifests.METRICS_SERVICE)
    assert selects(monitor["spec"]["selector"]["matchLabels"], metrics["metadata"]["labels"])
    assert monitor["spec"]["endpoints"][0]["port"] == metrics["spec"]["ports"][0]["name"]


def test_everything_lives_in_one_namespace_with_its_service_account(
        objects: list[JSON]) -> None:
    namespaced = [o for o in objects if o["kind"] in
                  ("Deployment", "Service", "ServiceAccount", "PodDisruptionBudget",
                   "NetworkPolicy")]
    assert {o["metadata"]["namespace"] for o in namespaced} == {roles.NAMESPACE}
    account = by_kind(objects, "ServiceAccount")[0]["metadata"]["name"]
    assert pod_spec(by_kind(objects, "Deployment")[0])["serviceAccountName"] == account
    bound = {(s["kind"], s.get("namespace"), s["name"])
             for b in by_kind(objects, "ClusterRoleBinding") for s in b["subjects"]}
    assert ("ServiceAccount", roles.NAMESPACE, account) in bound


def test_the_rbac_is_fedctl_rbacs(objects: list[JSON]) -> None:
    """The same ClusterRoles, Roles and bindings as `fedctl rbac --only hub` prints."""
    printed = CliRunner().invoke(rbac.rbac, ["--only", "hub"])
    assert printed.exit_code == 0, printed.output
    expected = [d for d in yaml.safe_load_all(printed.output)
                if d and d["kind"] != "Namespace"]
    ours = [o for o in objects if o["apiVersion"].startswith(roles.RBAC_GROUP)]
    assert ours == expected


def test_secret_namespaces_add_their_role_bindings_only() -> None:
    """--secret-namespaces grants per namespace; none by default."""
    default = manifests.control_plane(Options(), [])
    assert not [o for o in default if o["kind"] == "RoleBinding"
                and o["metadata"]["name"] == roles.SECRETS_ROLE]
    settings = roles.Settings(secret_namespaces=("shop",))
    granted = manifests.control_plane(Options(rbac=settings), [])
    assert [o["metadata"]["namespace"] for o in granted if o["kind"] == "RoleBinding"
            and o["metadata"]["name"] == roles.SECRETS_ROLE] == ["shop"]


def test_the_crds_are_the_installed_ones(objects: list[JSON]) -> None:
    """The CRDs `fedctl install` applies, with their digests (so `fedctl run` skips them)."""
    names = [o["metadata"]["name"] for o in by_kind(objects, "CustomResourceDefinition")]
    assert sorted(names) == sorted(roles.CRD_NAMES)
    for crd in by_kind(objects, "CustomResourceDefinition"):
        assert "federation.io/crd-digest" in crd["metadata"]["annotations"]


def test_printed_order_applies_with_kubectl(objects: list[JSON]) -> None:
    """CRDs first, the namespace before anything in it."""
    kinds = [o["kind"] for o in objects]
    assert kinds[:len(roles.CRD_NAMES)] == ["CustomResourceDefinition"] * len(roles.CRD_NAMES)
    first_in_namespace = min(i for i, o in enumerate(objects)
                             if o["metadata"].get("namespace") == roles.NAMESPACE)
    assert kinds.index("Namespace") < first_in_namespace


# -- the agent ------------------------------------------------------------------------------


def test_the_agents_rbac_is_the_member_role_bound_to_its_account_alone() -> None:
    """Least privilege: the member role (what the control plane has in a push member), and
    no subject but the agent's ServiceAccount (not the control plane's user)."""
    role, binding = manifests.agent_rbac(Options())
    assert role == roles.member(roles.Settings())[0].body
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": manifests.AGENT_NAME,
                                    "namespace": manifests.AGENT_NAMESPACE}]


def test_the_agent_reads_and_renews_its_certificate_in_its_secret_through_the_api() -> None:
    """Issue 22, gap 1: a renewal kept in an emptyDir was lost with the pod. No Secret
    volume (read-only) and no copy of the key on any volume: the agent reads the Secret of
    its own namespace and writes renewals back to it."""
    deployment = manifests.agent_deployment(Options())
    spec = pod_spec(deployment)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "initContainers" not in spec
    assert {v["name"] for v in spec["volumes"]} == {"state", "tmp"}
    agent = spec["containers"][0]
    assert {m["name"] for m in agent["volumeMounts"]} == {"state", "tmp"}
    assert f"--tls-secret=$(POD_NAMESPACE)/{manifests.AGENT_TLS_SECRET}" in agent["args"]
    assert not any(a.startswith(("--tls-cert", "--tls-key", "--tls-ca")) for a in agent["args"])
    env = {e["name"]: e["valueFrom"] for e in agent["env"]}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    secret = manifests.agent_secret()
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert all(base64.b64decode(v) == b"" for v in secret["data"].values())  # a reference


def test_the_agents_variables_come_from_its_config_map() -> None:
    config = manifests.agent_config()
    agent = pod_spec(manifests.agent_deployment(Options()))["containers"][0]
    refs = {e["name"]: e["valueFrom"]["configMapKeyRef"] for e in agent["env"]
            if "configMapKeyRef" in e["valueFrom"]}
    assert set(refs) == {"CLUSTER_NAME", "HUB_ADDRESS"}
    for variable, ref in refs.items():
        assert ref["name"] == config["metadata"]["name"] and ref["key"] in config["data"]
        assert any(f"$({variable})" in arg for arg in agent["args"])


# -- config/ ---------------------------------------------------------------------------------


def test_config_is_what_the_generator_writes() -> None:
    """config/ in the repository equals `make manifests`' output, file by file (run `make
    manifests` after changing federation/deploy)."""
    root = ROOT / "config"
    expected = tree.generate()
    present = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.yaml")}
    assert sorted(present) == sorted(expected)
    for path, text in expected.items():
        assert present[path] == text, f"config/{path} differs: run `make manifests`"


def test_write_removes_stale_files_and_is_idempotent(tmp_path: Path) -> None:
    stale = tmp_path / "manager" / "old.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("kind: Old\n")
    first = tree.write(tmp_path)
    assert not stale.exists()
    assert tree.write(tmp_path) == first
    assert {str(p.relative_to(tmp_path)) for p in first} == set(tree.generate())


def test_the_kustomizations_name_files_that_exist() -> None:
    files = tree.generate()
    for path, text in files.items():
        if not path.endswith("kustomization.yaml"):
            continue
        base = Path(path).parent
        body = yaml.safe_load(text)
        for entry in [*body.get("resources", []), *body.get("components", [])]:
            normal = _normalise((base / entry).as_posix())
            assert normal in files or f"{normal}/kustomization.yaml" in files, (path, entry)


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


# -- fedctl install --control-plane --print ----------------------------------------------------


def test_print_is_the_control_plane_and_touches_no_cluster(tmp_path: Path) -> None:
    """No kubeconfig is read: a missing one is no error."""
    result = CliRunner().invoke(install.install, ["--control-plane", "--print",
                                       "--kubeconfig", str(tmp_path / "absent.yaml")])
    assert result.exit_code == 0, result.output
    printed = [d for d in yaml.safe_load_all(result.output) if d]
    assert printed == manifests.control_plane(Options(), tree.shipped_crds())


def test_print_without_control_plane_is_refused() -> None:
    result = CliRunner().invoke(install.install, ["--print"])
    assert result.exit_code == 2
    assert "--print is only used with --control-plane" in result.output


def test_print_follows_the_rbac_options() -> None:
    result = CliRunner().invoke(install.install, ["--control-plane", "--print",
                                       "--secret-namespaces", "shop"])
    assert result.exit_code == 0, result.output
    printed = [d for d in yaml.safe_load_all(result.output) if d]
    assert any(d["kind"] == "RoleBinding" and d["metadata"].get("namespace") == "shop"
               for d in printed)


def test_the_agents_certificate_role_names_its_one_secret_and_binds_its_account_alone(
        ) -> None:
    """The Role the certificate write needs: get and update of the agent's own Secret, by
    name (no list, watch, create or delete; no other Secret), bound to nothing but the
    agent's ServiceAccount."""
    role, binding = (m.body for m in manifests.agent_certificate_rbac())
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == manifests.AGENT_NAMESPACE
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "resourceNames": [manifests.AGENT_TLS_SECRET],
                              "verbs": ["get", "update"]}]
    assert binding["kind"] == "RoleBinding" and binding["roleRef"]["name"] == \
        role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": manifests.AGENT_NAME,
                                    "namespace": manifests.AGENT_NAMESPACE}]
    objects = manifests.agent_objects(Options())
    assert role in objects and binding in objects
    secret = manifests.agent_secret()
    assert secret["metadata"]["name"] == manifests.AGENT_TLS_SECRET


def test_the_dashboard_is_off_by_default_and_adds_no_privilege(objects: list[JSON]) -> None:
    """config/default has no dashboard; its component adds a container, a Service and a
    port, and no Role, binding or ServiceAccount (it uses TokenReview, held for metrics)."""
    [deployment] = by_kind(objects, "Deployment")
    assert [c["name"] for c in pod_spec(deployment)["containers"]] == ["manager"]
    assert not [o for o in objects if o["metadata"]["name"] == manifests.DASHBOARD_SERVICE]
    files = tree.generate()
    component = yaml.safe_load(files["dashboard/kustomization.yaml"])
    added = [d for name in (*component["resources"], *(p["path"] for p in
                                                       component["patches"]))
             for d in yaml.safe_load_all(files[f"dashboard/{name}"]) if d]
    assert sorted(d["kind"] for d in added) == ["Deployment", "NetworkPolicy", "Service"]
    [patch] = [d for d in added if d["kind"] == "Deployment"]
    [container] = pod_spec(patch)["containers"]
    assert container["args"][:2] == ["dashboard", "--in-cluster"]
    assert container["securityContext"] == manifests.container_security()
    assert "serviceAccountName" not in pod_spec(patch)  # the manager's, unchanged
    hub_rules = [r for m in manifests.hub_rbac(Options()) for r in m.body.get("rules", [])]
    assert not [r for r in hub_rules if "impersonate" in r.get("verbs", [])]
    [policy] = [d for d in added if d["kind"] == "NetworkPolicy"]
    ports = {p["port"] for p in policy["spec"]["ingress"][0]["ports"]}
    assert ports == {manifests.METRICS_PORT, manifests.WORK_PORT, manifests.DASHBOARD_PORT}
