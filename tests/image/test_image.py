"""Smoke tests of the fedctl image: built here from the Containerfile, then read and run.

What a platform team checks before running an image: who it runs as, what it runs, what else
is in it, whether it works on a read-only root filesystem, and whether a pod set up wrong
gets a one-line error naming what is missing rather than a traceback.
"""

from __future__ import annotations

import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from federation.local import pki
from tests.image.conftest import VERSION, Image, Podman

pytestmark = [pytest.mark.image, pytest.mark.e2e,
              pytest.mark.timeout(1800)]  # the first test waits for a build from nothing

MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
FORBIDDEN_PROGRAMS = {"sh", "bash", "dash", "busybox", "su", "sudo", "apt", "apt-get", "dpkg",
                      "pip", "pip3", "gcc", "cc", "c++", "g++", "ld", "as", "make", "perl",
                      "curl", "wget", "openssl"}
FORBIDDEN_PACKAGES = {"dpkg", "apt", "tar", "bash", "dash", "coreutils", "busybox", "perl",
                      "perl-base", "gcc-12", "cpp-12", "binutils", "make", "python3-pip"}
DEV_PACKAGES = ("pip", "setuptools", "wheel", "pytest", "mypy", "ruff", "hypothesis",
                "grpc_tools", "importlinter")


def one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """The one stderr line of a failed run, checked: exit 1, no traceback, names FRAGMENTS."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


# -- the image's configuration ------------------------------------------------------------

def test_it_runs_fedctl_as_a_numeric_non_root_user(image: Image) -> None:
    """ENTRYPOINT fedctl, USER 65532:65532 (numeric: runAsNonRoot can check it)."""
    config = image.config["config"]
    assert isinstance(config, dict)
    assert config["Entrypoint"] == ["fedctl"]
    assert config["User"] == "65532:65532"
    assert "PATH=/opt/venv/bin:/usr/bin:/bin" in config["Env"]


def test_its_labels_name_the_version_and_licence(image: Image) -> None:
    config = image.config["config"]
    assert isinstance(config, dict)
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "fedctl"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.description"]
    assert "org.opencontainers.image.source" in labels
    assert labels["org.opencontainers.image.revision"]


# -- what is in it --------------------------------------------------------------------------

def test_python_is_the_only_program_outside_the_venv(image: Image) -> None:
    """No shell, package manager, compiler or network tool for an intruder to use."""
    in_bin = {path: entry for path, entry in image.files.items()
              if path.rsplit("/", 2)[-2] in ("bin", "sbin")}
    programs = {path for path, entry in in_bin.items() if entry.executable
                and not path.startswith("/opt/venv/")}
    assert programs == {"/usr/bin/python3.11"}
    named = {path for path in in_bin if path.rsplit("/", 1)[-1] in FORBIDDEN_PROGRAMS}
    assert named == set()


def test_no_package_manager_or_compiler_package_was_unpacked(image: Image) -> None:
    """The Debian packages whose files are in the image (status.d, what scanners read)."""
    status = "/var/lib/dpkg/status.d/"
    packages = {path[len(status):] for path in image.files if path.startswith(status)}
    assert "python3.11-minimal" in packages
    assert packages & FORBIDDEN_PACKAGES == set()


def test_the_venv_holds_runtime_packages_only(image: Image) -> None:
    """No pip to install with, no development tool from the lock, no wheel to unpack."""
    site = "/opt/venv/lib/python3.11/site-packages/"
    top = {path[len(site):].split("/", 1)[0] for path in image.files if path.startswith(site)}
    assert "federation" in top and "aiohttp" in top and "grpc" in top
    for package in DEV_PACKAGES:
        assert not {name for name in top if name == package
                    or name.startswith(package + "-")}, package
    assert not [path for path in image.files if path.endswith(".whl")]
    commands = {path for path in image.files if path.startswith("/opt/venv/bin/")}
    assert commands == {"/opt/venv/bin/" + name
                        for name in ("fedctl", "python", "python3", "python3.11")}


def test_the_user_cannot_change_what_it_runs(image: Image) -> None:
    """Everything is root's and not writable by others, but /tmp and the user's home; no
    setuid or setgid file to climb back to root with."""
    writable = {path for path, entry in image.files.items()
                if entry.uid == 65532 or entry.gid == 65532
                or (entry.mode & 0o002 and entry.kind != tarfile.SYMTYPE)}
    assert writable == {"/tmp", "/home/nonroot"}
    assert image.files["/tmp"].mode & stat.S_ISVTX
    elevated = {path for path, entry in image.files.items()
                if entry.mode & (stat.S_ISUID | stat.S_ISGID)}
    assert elevated == set()


# -- running it -----------------------------------------------------------------------------

def test_help_is_what_it_does_by_default(podman: Podman) -> None:
    result = podman.run()
    assert result.returncode == 0, result.stderr
    for command in ("run", "agent", "reloader", "install", "version"):
        assert f"\n  {command} " in result.stdout


def test_version_is_the_projects(podman: Podman) -> None:
    result = podman.run("version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"fedctl {VERSION} (Python 3.11.")


def test_the_process_is_not_root(podman: Podman) -> None:
    result = podman.run("-c", "import os; print(os.getuid(), os.getgid(), os.getgroups())",
                        entrypoint="/usr/bin/python3")
    assert result.returncode == 0, result.stderr
    uid, gid, groups = result.stdout.split(" ", 2)
    assert (uid, gid) == ("65532", "65532")
    assert "0" not in groups.strip("[]\n").split(", ")


def test_offline_commands_need_no_writable_root(podman: Podman) -> None:
    """Read-only root, /tmp a tmpfs: printing RBAC and planning work (bytecode was made at
    build time, nothing is written beside the code)."""
    rbac = podman.run("rbac")
    assert rbac.returncode == 0, rbac.stderr
    assert "kind: ClusterRole" in rbac.stdout
    examples = Path(__file__).resolve().parents[2] / "examples" / "placement"
    plan = podman.run("plan", "-f", "/examples/division.yaml", "--clusters",
                      "/examples/members.yaml", volumes=[(examples, "/examples")])
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.strip()


def test_run_with_no_kubeconfig_outside_a_pod_says_so(podman: Podman) -> None:
    one_line_error(podman.run("run"), "no kubeconfig", "/home/nonroot/.kube/config")


def test_run_in_a_pod_without_the_token_mount_names_it(podman: Podman) -> None:
    """automountServiceAccountToken: false, say: the missing file is named."""
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    one_line_error(podman.run("run", env=env), f"{MOUNT}/token is missing")


def service_account_mount(directory: Path, token: str) -> Path:
    """A ServiceAccount mount as the kubelet writes it: token, ca.crt, namespace, readable."""
    mount = directory / "serviceaccount"
    mount.mkdir(mode=0o755)
    (mount / "ca.crt").write_bytes(pki.ensure(directory / "pki", "image-test").ca_cert
                                   .read_bytes())
    (mount / "token").write_text(token)
    (mount / "namespace").write_text("federation-system")
    for path in mount.iterdir():
        path.chmod(0o644)
    return mount


@pytest.mark.parametrize("command", [["run"], ["run", "--leader-elect"]])
def test_run_in_a_pod_uses_the_mount_and_names_the_unreachable_server(
        podman: Podman, tmp_path: Path, command: list[str]) -> None:
    """With the mount and no kubeconfig, fedctl dials KUBERNETES_SERVICE_HOST:PORT with the
    mounted CA and token: nothing listens there, so one line names the address; the token
    never appears in it."""
    token = "image-test-token-must-not-leak"
    mount = service_account_mount(tmp_path, token)
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    result = podman.run(*command, env=env, volumes=[(mount, MOUNT)])
    line = one_line_error(result, "in-cluster", "127.0.0.1:6443")
    assert token not in line and token not in result.stdout


def test_agent_in_a_pod_without_its_certificate_names_it(podman: Podman) -> None:
    result = podman.run("agent", "--hub-address", "hub:9443", "--cluster-name", "edge",
                        "--tls-cert", "/certs/tls.crt", "--tls-key", "/certs/tls.key",
                        "--tls-ca", "/certs/ca.crt")
    one_line_error(result, "--tls-cert /certs/tls.crt")


def test_run_as_another_uid_with_an_unreadable_home_is_one_line(podman: Podman) -> None:
    """OpenShift-style: an arbitrary uid whose HOME is the image's 0700 /home/nonroot."""
    one_line_error(podman.run("run", user="1000:1000", env={"HOME": "/home/nonroot"}),
                   "kubeconfig")
