"""Finding and producing the Kubernetes binaries the local fleet runs.

The fleet needs two programs: ``kube-apiserver`` and ``etcd``. We look for them
where envtest users already keep them (``$KUBEBUILDER_ASSETS``), then in our own
override (``$FEDERATION_KUBE_BIN``), then on ``PATH``, then in our cache. When
one is missing, :func:`install` produces it using only the package registries
this project may reach: ``etcd`` comes from Debian's ``etcd-server`` package,
``kube-apiserver`` is compiled from Debian's ``kubernetes`` source package
(v1.20.2, vendored dependencies included) with Go 1.15 taken from Debian
bullseye. Go 1.15 and not bookworm's Go 1.19: the vendored ``reflect2`` v1.0.1
miscompiles on Go >= 1.18 and the server then panics when it serialises maps.

The build is slow (about five minutes on two cores), so its result is cached
under ``~/.cache/federation/kube-bin/v1.20.2`` and never rebuilt while present.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

KUBE_VERSION = "v1.20.2"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEB_SRC_LIST = Path("/etc/apt/sources.list.d/federation-deb-src.sources")
BINARY_NAMES = ("kube-apiserver", "etcd")

Progress = Callable[[str], None]


class BinaryError(Exception):
    """A binary is missing and cannot be produced; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class KubeBinaries:
    kube_apiserver: Path
    etcd: Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "federation" / "kube-bin" / KUBE_VERSION


def search_dirs() -> list[Path]:
    """Directories searched for binaries, in priority order."""
    dirs: list[Path] = []
    for var in ("KUBEBUILDER_ASSETS", "FEDERATION_KUBE_BIN"):
        if value := os.environ.get(var):
            dirs.append(Path(value))
    dirs.extend(Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p)
    dirs.append(cache_dir())
    return dirs


def find_binary(name: str) -> Path | None:
    for directory in search_dirs():
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_binaries() -> KubeBinaries:
    """Locate both binaries or raise :class:`BinaryError` naming what is missing."""
    found = {name: find_binary(name) for name in BINARY_NAMES}
    apiserver, etcd = found["kube-apiserver"], found["etcd"]
    if apiserver is None or etcd is None:
        missing = [name for name, path in found.items() if path is None]
        raise BinaryError(
            f"{', '.join(missing)} not found in $KUBEBUILDER_ASSETS, $FEDERATION_KUBE_BIN, "
            f"PATH or {cache_dir()}; run `fedctl local install` to produce them"
        )
    return KubeBinaries(kube_apiserver=apiserver, etcd=etcd)


def install(progress: Progress) -> KubeBinaries:
    """Produce whichever binaries are missing, then return both."""
    if find_binary("etcd") is None:
        if shutil.which("apt-get") is None:
            raise BinaryError(
                f"etcd not found in $KUBEBUILDER_ASSETS, $FEDERATION_KUBE_BIN, PATH or "
                f"{cache_dir()}, and it cannot be installed here (no apt-get); put an etcd "
                "binary in $FEDERATION_KUBE_BIN"
            )
        progress("installing etcd from Debian's etcd-server package")
        _apt_install(["etcd-server"], progress)
    if find_binary("kube-apiserver") is None:
        build_kube_apiserver(progress)
    return find_binaries()


def build_kube_apiserver(progress: Progress) -> Path:
    """Compile kube-apiserver from Debian's kubernetes source into the cache."""
    _require_tools(progress)
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="federation-kube-build-"))
    try:
        source_tree = _fetch_kubernetes_source(work, progress)
        goroot = _fetch_go(work, progress)
        binary = _compile(source_tree, goroot, work, progress)
        installed = target / "kube-apiserver"
        shutil.copy2(binary, installed.with_suffix(".partial"))
        installed.with_suffix(".partial").rename(installed)
        progress(f"kube-apiserver {KUBE_VERSION} cached at {installed}")
        return installed
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _require_tools(progress: Progress) -> None:
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise BinaryError(
                f"cannot build kube-apiserver: `{tool}` is not available (this recipe needs "
                "Debian); put a kube-apiserver binary in $FEDERATION_KUBE_BIN instead"
            )
    if os.geteuid() != 0 and shutil.which("sudo") is None:
        raise BinaryError(
            "cannot build kube-apiserver: installing its build inputs needs root (apt-get); "
            "run `fedctl local install` as root or put a kube-apiserver binary in "
            "$FEDERATION_KUBE_BIN"
        )
    missing = [tool for tool in ("make", "rsync") if shutil.which(tool) is None]
    if missing:
        _apt_install(missing, progress)


def _root(cmd: Sequence[str]) -> list[str]:
    return list(cmd) if os.geteuid() == 0 else ["sudo", "-n", *cmd]


def _ensure_deb_src(progress: Progress) -> None:
    if DEB_SRC_LIST.exists():
        return
    progress(f"adding Debian source entries ({DEB_SRC_LIST})")
    text = (
        f"Types: deb-src\nURIs: {DEBIAN_MIRROR}\nSuites: bookworm\nComponents: main\n"
        f"Signed-By: {DEBIAN_KEYRING}\n"
    )
    if os.geteuid() == 0:
        DEB_SRC_LIST.write_text(text)
    else:
        subprocess.run(_root(["tee", str(DEB_SRC_LIST)]), input=text.encode(), check=True,
                       stdout=subprocess.DEVNULL)
    run_logged(_root(["apt-get", "update"]), progress, "apt-get update")


def _apt_install(packages: list[str], progress: Progress) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run_logged(_root(["apt-get", "install", "-y", "--no-install-recommends", *packages]),
               progress, f"apt-get install {' '.join(packages)}", env=env)


def _fetch_kubernetes_source(work: Path, progress: Progress) -> Path:
    _ensure_deb_src(progress)
    download = work / "src"
    download.mkdir()
    run_logged(["apt-get", "source", "--download-only", "kubernetes"], progress,
               "downloading Debian's kubernetes source", cwd=download)
    tarballs = sorted(download.glob("kubernetes_*.orig.tar.gz"))
    if not tarballs:
        raise BinaryError("apt-get source kubernetes produced no .orig.tar.gz")
    progress(f"unpacking {tarballs[0].name}")
    with tarfile.open(tarballs[0]) as archive:
        archive.extractall(download, filter="tar")
    trees = [p for p in download.iterdir() if (p / "cmd" / "kube-apiserver").is_dir()]
    if not trees:
        raise BinaryError("the kubernetes source tarball holds no cmd/kube-apiserver")
    return trees[0]


def _fetch_go(work: Path, progress: Progress) -> Path:
    """Download Go 1.15 from bullseye with a private apt state; the system's stays untouched."""
    apt = work / "apt"
    (apt / "lists" / "partial").mkdir(parents=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True)
    sources = apt / "sources.list"
    sources.write_text(f"deb [signed-by={DEBIAN_KEYRING}] {DEBIAN_MIRROR} bullseye main\n")
    options = [
        "-o", f"Dir::Etc::sourcelist={sources}",
        "-o", "Dir::Etc::sourceparts=-",
        "-o", f"Dir::State::Lists={apt / 'lists'}",
        "-o", f"Dir::Cache={apt / 'cache'}",
        "-o", "APT::Get::List-Cleanup=0",
    ]
    run_logged(["apt-get", *options, "update"], progress, "apt-get update (bullseye, private)")
    debs = work / "debs"
    debs.mkdir()
    run_logged(["apt-get", *options, "download", "golang-1.15-go", "golang-1.15-src"], progress,
               "downloading Go 1.15", cwd=debs)
    goroot_base = work / "go"
    for deb in sorted(debs.glob("*.deb")):
        run_logged(["dpkg-deb", "-x", str(deb), str(goroot_base)], progress,
                   f"unpacking {deb.name}")
    goroot = goroot_base / "usr" / "lib" / "go-1.15"
    if not (goroot / "bin" / "go").exists():
        raise BinaryError(f"Go 1.15 was not found in the downloaded packages ({goroot})")
    return goroot


def _compile(source_tree: Path, goroot: Path, work: Path, progress: Progress) -> Path:
    home = work / "home"
    home.mkdir()
    env = {
        **os.environ,
        "GOROOT": str(goroot),
        "PATH": f"{goroot / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "GOCACHE": str(work / "gocache"),
        "GOPATH": str(work / "gopath"),
        "CGO_ENABLED": "0",
    }
    env.pop("GOTOOLCHAIN", None)
    run_logged(["make", "WHAT=cmd/kube-apiserver"], progress,
               "compiling kube-apiserver (about 5 minutes on 2 cores)", cwd=source_tree, env=env)
    binary = source_tree / "_output" / "local" / "bin" / "linux" / "amd64" / "kube-apiserver"
    if not binary.exists():
        found = list((source_tree / "_output").rglob("kube-apiserver"))
        if not found:
            raise BinaryError("the build finished but produced no kube-apiserver binary")
        binary = found[0]
    return binary


def run_logged(
    cmd: Sequence[str],
    progress: Progress,
    title: str,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """Run a command, reporting progress every 15 s; on failure show its last lines.

    Compilers stay silent for minutes, so progress comes from a ticker thread,
    not from the command's output.
    """
    progress(f"{title} ...")
    started = time.monotonic()
    tail: list[str] = []
    finished = threading.Event()

    def tick() -> None:
        while not finished.wait(15):
            last = tail[-1].strip()[:80] if tail else ""
            progress(f"{title}: {int(time.monotonic() - started)}s {last}")

    ticker = threading.Thread(target=tick, name=f"progress of {title}", daemon=True)
    ticker.start()
    try:
        with subprocess.Popen(
            list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace",
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail = [*tail[-19:], line.rstrip()]
            code = proc.wait()
    except FileNotFoundError as exc:
        raise BinaryError(f"{title} failed: {exc}") from None
    finally:
        finished.set()
    if code != 0:
        detail = "\n    ".join(tail)
        raise BinaryError(f"{title} failed (exit {code}): {' '.join(cmd)}\n    {detail}")
    progress(f"{title}: done in {int(time.monotonic() - started)}s")
