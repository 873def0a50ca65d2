"""Fixtures of the image tests: the image built from the Containerfile, read and run.

``image_archive`` builds it once a session with scripts/build-image.sh, as ``make image``
does (buildah's layer cache in build/image makes a second session rebuild only what
changed). The tests read that OCI archive, the artefact itself, and run it with podman from a
storage of the session's own, the way a careful pod runs it: read-only root filesystem with
a tmpfs on /tmp (an emptyDir), every capability dropped, no new privileges, no network.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import posixpath
import shutil
import subprocess
import tarfile
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
TOOLS = ("mmdebstrap", "buildah", "podman", "runc")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "image: builds the container image and runs it (root, buildah, podman)")


@dataclass(frozen=True)
class Entry:
    """One path of the image's merged filesystem."""

    path: str
    mode: int
    uid: int
    gid: int
    kind: bytes  # tarfile's type: REGTYPE, DIRTYPE, SYMTYPE, ...

    @property
    def executable(self) -> bool:
        return self.kind == tarfile.REGTYPE and bool(self.mode & 0o111)


@dataclass
class Image:
    """An OCI image archive: its config and the files of its layers, merged."""

    config: dict[str, object]
    files: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def read(cls, archive: Path) -> Image:
        with tarfile.open(archive) as outer:
            def read(name: str) -> bytes:
                member = outer.extractfile(name)
                assert member is not None, name
                return member.read()

            def blob(digest: str) -> bytes:
                return read("blobs/" + digest.replace(":", "/"))

            index = json.loads(read("index.json"))
            manifest = json.loads(blob(index["manifests"][0]["digest"]))
            image = cls(json.loads(blob(manifest["config"]["digest"])))
            for layer in manifest["layers"]:
                image.apply(blob(layer["digest"]))
        return image

    def apply(self, layer: bytes) -> None:
        """Apply one layer (gzip or plain tar), whiteouts included."""
        data = gzip.decompress(layer) if layer[:2] == b"\x1f\x8b" else layer
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                path = posixpath.normpath("/" + member.name)
                parent, base = posixpath.split(path)
                if base == ".wh..wh..opq":
                    self.remove_under(parent)
                elif base.startswith(".wh."):
                    self.files.pop(posixpath.join(parent, base[4:]), None)
                    self.remove_under(posixpath.join(parent, base[4:]))
                else:
                    self.files[path] = Entry(path, member.mode, member.uid, member.gid,
                                             member.type)

    def remove_under(self, directory: str) -> None:
        for path in [p for p in self.files if p.startswith(directory.rstrip("/") + "/")]:
            del self.files[path]


@dataclass
class Podman:
    """`podman run` of the image, hardened as the shipped Deployment runs it."""

    base: list[str]
    image: str

    def run(self, *args: str, env: dict[str, str] | None = None,
            volumes: Sequence[tuple[Path, str]] = (), user: str | None = None,
            entrypoint: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [*self.base, "run", "--rm", "--read-only", "--read-only-tmpfs=false",
                   "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777", "--cap-drop=all",
                   "--security-opt=no-new-privileges", "--network=none",
                   # This sandbox caps hard limits below podman's defaults and denies
                   # raising them (no CAP_SYS_RESOURCE): ask for what it allows.
                   "--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024"]
        for name, value in (env or {}).items():
            command += ["--env", f"{name}={value}"]
        for source, target in volumes:
            command += ["--volume", f"{source}:{target}:ro"]
        if user is not None:
            command += ["--user", user]
        if entrypoint is not None:
            command += ["--entrypoint", entrypoint]
        return subprocess.run([*command, self.image, *args], capture_output=True, text=True,
                              timeout=timeout, check=False)


@pytest.fixture(scope="session")
def image_archive() -> Path:
    """build/image/fedctl-<version>.oci.tar, (re)built from the Containerfile now."""
    if os.geteuid() != 0:
        pytest.fail("the image tests need root: mmdebstrap, buildah and podman chroots")
    for tool in TOOLS:
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found: scripts/system-deps.sh installs it (make deps)")
    build = subprocess.run([str(ROOT / "scripts" / "build-image.sh")], cwd=ROOT,
                           capture_output=True, text=True, timeout=1800, check=False)
    if build.returncode != 0:
        pytest.fail(f"scripts/build-image.sh failed:\n{build.stdout}\n{build.stderr}")
    return ROOT / "build" / "image" / f"fedctl-{VERSION}.oci.tar"


@pytest.fixture(scope="session")
def image(image_archive: Path) -> Image:
    return Image.read(image_archive)


@pytest.fixture(scope="session")
def podman(image_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    """The archive loaded into a podman storage of this session's own, removed after."""
    storage = tmp_path_factory.mktemp("podman")
    base = ["podman", "--root", str(storage / "root"), "--runroot", str(storage / "run"),
            "--storage-driver", os.environ.get("IMAGE_STORAGE_DRIVER", "overlay"),
            # crun refuses the hybrid cgroup hierarchy (v1 and v2) of these machines
            "--runtime", "runc", "--events-backend", "none"]
    subprocess.run([*base, "load", "--quiet", "--input", str(image_archive)], check=True,
                   capture_output=True, timeout=300)
    yield Podman(base, f"localhost/fedctl:{VERSION}")
    subprocess.run([*base, "system", "reset", "--force"], capture_output=True, timeout=120,
                   check=False)
