"""Fixtures of the image tests: the image built from the Containerfile, read and run.

``image_archive`` builds it once a session with scripts/build-image.sh, as ``make image``
does (buildah's layer cache in build/image makes a second session rebuild only what
changed). A session that will run an image test starts that build as soon as its tests are
collected, in the background at the lowest CPU and I/O priority: on a fresh machine it
takes about two minutes, mostly waiting for downloads, which `make test`'s e2e modules
(collected first, run first) would otherwise wait for at the end. The tests read that OCI
archive, the artefact itself, and run it with podman from a storage of the session's own,
the way a careful pod runs it: read-only root filesystem with a tmpfs on /tmp (an
emptyDir), every capability dropped, no new privileges, no network.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import posixpath
import shutil
import signal
import subprocess
import tarfile
import tempfile
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


BUILD_TIMEOUT = 1800
"""Seconds a build from nothing may take (the first image test's own timeout too)."""


def build_missing() -> str | None:
    """Why this machine cannot build the image, or None."""
    if os.geteuid() != 0:
        return "the image tests need root: mmdebstrap, buildah and podman chroots"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} not found: scripts/system-deps.sh installs it (make deps)"
    return None


class Build:
    """scripts/build-image.sh running in a process group of its own, its output in a
    temporary file (the script's own trap removes what a stopped build leaves)."""

    def __init__(self, background: bool) -> None:
        self.output = tempfile.TemporaryFile()  # noqa: SIM115 (read after the build ends)
        # In the background the e2e modules keep the CPU and the disk (their timings):
        # the build gets what they leave.
        low = ["nice", "-n", "19", *(["ionice", "-c", "3"] if shutil.which("ionice") else [])]
        self.process = subprocess.Popen(
            [*(low if background else []), str(ROOT / "scripts" / "build-image.sh")],
            cwd=ROOT, stdout=self.output, stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self) -> None:
        """Fail the test unless the build ends, well, within BUILD_TIMEOUT."""
        self.hurry()
        try:
            code = self.process.wait(timeout=BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"scripts/build-image.sh took over {BUILD_TIMEOUT}s")
        if code != 0:
            self.output.seek(0)
            pytest.fail(f"scripts/build-image.sh failed:\n"
                        f"{self.output.read().decode(errors='replace')}")

    def hurry(self) -> None:
        """Back to normal CPU and I/O priority: a test waits for the build now."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(OSError):  # the group may have ended meanwhile
            os.setpriority(os.PRIO_PGRP, self.process.pid, 0)
        if shutil.which("ionice"):
            subprocess.run(["ionice", "-c", "2", "-n", "4", "-P", str(self.process.pid)],
                           capture_output=True, timeout=30, check=False)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


_background: list[Build] = []
"""The build this session started at collection, if any (at most one)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the build now when an image test is to run (not in an xdist worker: two
    workers would build into the same directory; the fixture builds there instead)."""
    if session.config.option.collectonly or hasattr(session.config, "workerinput") \
            or build_missing() is not None:
        return
    if any(item.get_closest_marker("image") for item in session.items):
        _background.append(Build(background=True))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A session that stops before its image tests (-x, a failure, Ctrl-C) stops the build."""
    for build in _background:
        build.stop()


@pytest.fixture(scope="session")
def image_archive() -> Path:
    """build/image/fedctl-<version>.oci.tar, (re)built from the Containerfile in this
    session (in the background since collection, or now)."""
    missing = build_missing()
    if missing is not None:
        pytest.fail(missing)
    build = _background[0] if _background else Build(background=False)
    build.wait()
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
