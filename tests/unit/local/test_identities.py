"""The local fleet's two identities: an admin in system:masters, the control plane in no group."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from federation.local import fleet, pki


def subject(path: Path) -> tuple[str, list[str]]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    groups = [str(a.value) for a in cert.subject.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME)]
    return str(common), groups


def test_the_control_plane_certificate_names_a_user_in_no_group(tmp_path: Path) -> None:
    """CN federation:control-plane, no O (so never system:masters), signed by the cluster CA."""
    keys = pki.ensure(tmp_path, "member1")
    assert subject(keys.control_plane_cert) == (pki.CONTROL_PLANE_USER, [])
    assert subject(keys.admin_cert) == (pki.ADMIN_USER, ["system:masters"])
    ca = x509.load_pem_x509_certificate(keys.ca_cert.read_bytes())
    cert = x509.load_pem_x509_certificate(keys.control_plane_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    assert keys.control_plane_key.stat().st_mode & 0o077 == 0


def test_an_older_pki_gets_the_control_plane_certificate_on_the_next_ensure(
        tmp_path: Path) -> None:
    """A fleet made before this identity existed keeps its CA and admin; only the missing
    certificate is added."""
    keys = pki.ensure(tmp_path, "hub")
    admin = keys.admin_cert.read_bytes()
    keys.control_plane_cert.unlink()
    keys.control_plane_key.unlink()
    again = pki.ensure(tmp_path, "hub")
    assert again.admin_cert.read_bytes() == admin
    assert subject(again.control_plane_cert) == (pki.CONTROL_PLANE_USER, [])


def test_up_writes_a_second_kubeconfig_with_the_same_contexts(tmp_path: Path) -> None:
    """kubeconfigs/local.yaml holds the admin, local-control-plane.yaml the control plane:
    same contexts and servers, different client certificates."""
    target = fleet.Fleet(tmp_path / "state", tmp_path / "kubeconfigs" / "local.yaml")
    config = target._plan(2, None, None)
    target._save(config)
    path = target.ensure_control_plane_identity()
    assert path == tmp_path / "kubeconfigs" / "local-control-plane.yaml"
    admin = yaml.safe_load(target.kubeconfig.read_text())
    plane = yaml.safe_load(path.read_text())
    assert [c["name"] for c in plane["contexts"]] == ["hub", "member1", "member2"]
    assert plane["clusters"] == admin["clusters"]
    for user in plane["users"]:
        cert = base64.b64decode(user["user"]["client-certificate-data"])
        common = x509.load_pem_x509_certificate(cert).subject
        assert common.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == \
            pki.CONTROL_PLANE_USER
    assert path.stat().st_mode & 0o077 == 0
    target.down()
    assert not path.exists() and not target.kubeconfig.exists()


def test_up_pull_gives_the_control_plane_no_kubeconfig_for_the_pulled_member(
        tmp_path: Path) -> None:
    """`fedctl local up --pull member2`: the control plane's kubeconfig loses member2; the
    agent gets one of its own holding member2 only (the least-privilege identity), and runs
    against the work server's port with its certificate from `fedctl join --mode pull`."""
    target = fleet.Fleet(tmp_path / "state", tmp_path / "kubeconfigs" / "local.yaml")
    config = target._plan(2, None, None)
    target._save(config)
    target.ensure_control_plane_identity()
    config = target.set_pull(["member2"])
    plane = yaml.safe_load(target.control_plane_kubeconfig.read_text())
    assert [c["name"] for c in plane["contexts"]] == ["hub", "member1"]
    agent = yaml.safe_load(target.agent_kubeconfig("member2").read_text())
    assert [c["name"] for c in agent["contexts"]] == ["member2"]
    assert agent["current-context"] == "member2"
    assert target.agent_kubeconfig("member2").stat().st_mode & 0o077 == 0
    argv = target.agent_argv("member2")
    assert argv[argv.index("--hub-address") + 1] == f"127.0.0.1:{config.work_port}"
    assert argv[argv.index("--cluster-name") + 1] == "member2"
    admin = yaml.safe_load(target.kubeconfig.read_text())
    assert "member2" in [c["name"] for c in admin["contexts"]]  # kubectl and tests keep it
    reloaded = target.load()
    assert reloaded.pull == ["member2"] and reloaded.agent_ports["member2"]
    with pytest.raises(fleet.FleetError, match="no such member"):
        target.set_pull(["member7"])
    target.down()
    assert not target.agent_kubeconfig("member2").exists()


def test_in_cluster_the_pull_agent_is_its_deployments_pod_and_join_applies_its_manifests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the control plane in-cluster, a pull member's agent is the pod runner of its
    shipped Deployment in the member (start/stop-agent start and stop that runner, no host
    process), and the member is joined by `fedctl join --mode pull --apply-agent` with the
    member's admin context and the work server's address; clear_pull gives the control
    plane its kubeconfig of every member back."""
    from federation.local import pods

    target = fleet.Fleet(tmp_path / "state", tmp_path / "kubeconfigs" / "local.yaml")
    config = target._plan(2, None, None)
    config.in_cluster = True
    target._save(config)
    target.ensure_control_plane_identity()
    config = target.set_pull(["member2"])
    assert fleet.FleetConfig.from_json(config.to_json()).in_cluster
    calls: list[tuple[str, ...]] = []

    def start(state: Path, kubeconfig: Path, cluster: str, namespace: str, name: str,
              **_: object) -> Path:
        calls.append(("start", cluster, namespace, name))
        return state

    def stop(state: Path, cluster: str, namespace: str, name: str) -> bool:
        calls.append(("stop", cluster, namespace, name))
        return True

    ran: list[tuple[str, ...]] = []

    def fedctl(*args: str, progress: object) -> None:
        ran.append(args)

    monkeypatch.setattr(pods, "start", start)
    monkeypatch.setattr(pods, "stop", stop)
    monkeypatch.setattr(target, "_fedctl", fedctl)
    target.start_agent("member2")
    assert target.stop_agent("member2")
    assert calls == [("start", "member2", *target.AGENT), ("stop", "member2", *target.AGENT)]
    assert not target.agent_pid_file("member2").exists()
    target.join_pull_with_agent("member2", lambda _: None)
    args = ran[0]
    assert args[:4] == ("join", "member2", "--mode", "pull") and "--apply-agent" in args
    assert args[args.index("--context") + 1] == "member2"
    assert args[args.index("--hub-address") + 1] == f"127.0.0.1:{config.work_port}"
    assert "--out-dir" not in args
    target.clear_pull()
    plane = yaml.safe_load(target.control_plane_kubeconfig.read_text())
    assert [c["name"] for c in plane["contexts"]] == ["hub", "member1", "member2"]
    target.down()
