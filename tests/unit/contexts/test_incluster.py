"""In-cluster configuration: the ServiceAccount mount and service variables, client-go's way."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from federation.contexts import credentials, incluster, kubeconfig

ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture
def mount(tmp_path: Path) -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("first-token\n")
    (sa / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    (sa / "namespace").write_text("federation-system")
    return sa


def test_the_mount_becomes_one_context(mount: Path) -> None:
    context = incluster.config(ENV, mount).context()
    assert context.name == incluster.CONTEXT
    assert context.server == "https://10.96.0.1:443"
    assert context.ca_data == (mount / "ca.crt").read_bytes()
    assert context.token_file == mount / "token" and context.token is None
    assert context.namespace == "federation-system"
    assert incluster.namespace(mount) == "federation-system"


def test_ipv6_service_host_is_bracketed(mount: Path) -> None:
    env = {**ENV, "KUBERNETES_SERVICE_HOST": "fd00::1"}
    assert incluster.config(env, mount).context().server == "https://[fd00::1]:443"


@pytest.mark.parametrize(("env", "missing"), [
    ({}, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set"),
    ({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "KUBERNETES_SERVICE_PORT not set"),
    ({**ENV, "KUBERNETES_SERVICE_PORT": "https"}, "KUBERNETES_SERVICE_PORT is not a port"),
])
def test_missing_variables_are_named(mount: Path, env: dict[str, str], missing: str) -> None:
    with pytest.raises(kubeconfig.KubeconfigError, match=missing) as caught:
        incluster.config(env, mount)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("removed", ["token", "ca.crt"])
def test_a_missing_mount_file_is_named(mount: Path, removed: str) -> None:
    (mount / removed).unlink()
    with pytest.raises(kubeconfig.KubeconfigError, match=f"{mount / removed} is missing"):
        incluster.config(ENV, mount)


def test_without_namespace_file_the_namespace_is_default(mount: Path) -> None:
    (mount / "namespace").unlink()
    assert incluster.config(ENV, mount).context().namespace == "default"
    assert incluster.namespace(mount) is None


def test_load_prefers_files_then_the_pod(mount: Path, tmp_path: Path) -> None:
    """--kubeconfig and $KUBECONFIG win; ~/.kube/config when it exists; else the pod's mount."""
    home = tmp_path / "home"
    home.mkdir()
    in_pod = {**ENV, "HOME": str(home)}
    assert incluster.load(None, in_pod, mount).current_context == incluster.CONTEXT
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text(
        "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
        "contexts: [{name: mine, context: {cluster: c}}]\ncurrent-context: mine\n")
    assert incluster.load(None, in_pod, mount).current_context == "mine"
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("contexts: []\n")
    with pytest.raises(kubeconfig.KubeconfigError):
        incluster.load(tmp_path / "absent.yaml", in_pod, mount)


def test_outside_a_pod_a_missing_default_file_is_named(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    with pytest.raises(kubeconfig.KubeconfigError, match="no kubeconfig: give --kubeconfig"):
        incluster.load(None, env, tmp_path / "nothing")


async def test_a_rotated_token_is_read_again(mount: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet rotates the token file; the credentials re-read it after their TTL (and
    after a 401), on a fake clock."""
    now = [1000.0]
    monkeypatch.setattr("federation.contexts.credentials.time",
                        types.SimpleNamespace(monotonic=lambda: now[0]))
    context = incluster.config(ENV, mount).context()
    creds = credentials.for_context(context)
    assert (await creds.get()).token == "first-token"
    (mount / "token").write_text("second-token\n")
    assert (await creds.get()).token == "first-token"  # within the TTL: cached
    now[0] += credentials.TOKEN_FILE_TTL + 1
    assert (await creds.get()).token == "second-token"
    (mount / "token").write_text("third-token\n")
    creds.invalidate()  # a 401
    assert (await creds.get()).token == "third-token"



def test_an_unreadable_home_or_mount_is_one_line(mount: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A HOME or a mount directory this uid may not enter is never a traceback: Python 3.11's
    ``exists``/``is_file`` raise EACCES there (made to here, since the tests may run as root)."""
    locked = {tmp_path / "home" / ".kube" / "config", mount / "token", mount / "ca.crt",
              mount / "namespace"}
    real_stat = Path.stat

    def stat(self: Path, **kwargs: bool) -> os.stat_result:
        if self in locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied", str(self))))
    with pytest.raises(kubeconfig.KubeconfigError, match="no kubeconfig"):
        incluster.load(None, {"HOME": str(tmp_path / "home")}, mount)
    with pytest.raises(kubeconfig.KubeconfigError, match="missing or unreadable"):
        incluster.load(None, {**ENV, "HOME": str(tmp_path / "home")}, mount)
    assert incluster.namespace(mount) is None


def test_the_mount_may_be_moved_by_its_variable_and_nothing_else(mount: Path,
                                                                  tmp_path: Path) -> None:
    """FEDERATION_SERVICE_ACCOUNT_MOUNT (the local pod runner's) moves where the three files
    are read; the files are read and checked as at the standard path, a relative path is an
    error, and without the service variables it does not make a pod."""
    env = {**ENV, incluster.MOUNT_VARIABLE: str(mount)}
    assert incluster.mount_of(env) == mount
    assert incluster.mount_of(ENV) == incluster.MOUNT
    context = incluster.config(env).context()
    assert context.token_file == mount / "token"
    assert incluster.load(None, {**env, "HOME": str(tmp_path / "home")}).current_context == \
        incluster.CONTEXT
    with pytest.raises(kubeconfig.KubeconfigError, match="must be an absolute directory"):
        incluster.config({**ENV, incluster.MOUNT_VARIABLE: "relative/sa"})
    (mount / "token").unlink()
    with pytest.raises(kubeconfig.KubeconfigError, match=f"{mount}/token is missing"):
        incluster.config(env)
    with pytest.raises(kubeconfig.KubeconfigError, match="KUBERNETES_SERVICE_HOST"):
        incluster.config({incluster.MOUNT_VARIABLE: str(mount)})
