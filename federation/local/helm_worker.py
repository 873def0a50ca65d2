"""One ``helm template`` of a chart archive, as a JSON request and answer.

A tenant's chart is code as far as CPU and memory go (a ``range`` over ``until
100000000`` is a valid template), so the render runs as a child process held to limits it
cannot lift: CPU seconds (``RLIMIT_CPU``) and a wall-clock deadline, address space
(``RLIMIT_AS``), the size of what it writes (``RLIMIT_FSIZE``: Helm's output goes to a
file), and it dies with its parent (``PR_SET_PDEATHSIG``). It runs in a private temporary
directory that is its ``HOME`` and every ``HELM_*`` directory, with no other environment
(no credentials, no kubeconfig, no proxy), on the archive and a values file written there:
nothing to fetch (a chart whose ``charts/`` lacks a dependency fails, as ``helm template``
does without ``helm dependency build``), no cluster (``lookup`` returns nothing, DNS
functions are off as Helm leaves them).

The controller runs :func:`serve` in the kit's sandbox workers (a deadline and memory cap
on the worker too); ``fedctl app dry-run`` calls :func:`answer` in process. A request:
``{"helm": path, "archive": base64, "release", "namespace", "values", "includeCRDs",
"skipTests", "skipHooks", "timeout"}``; the answer ``{"manifest": text}`` or ``{"error":
one line, "reason": "refused"}``.
"""

from __future__ import annotations

import base64
import ctypes
import json
import math
import os
import resource
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from federation.rollouts import analysis
from federation.untrusted.text import one_line

JSON = dict[str, Any]

REFUSED = "refused"
MAX_OUTPUT = 8 * 2**20
"""Bytes of Helm's output (the manifest), as the model reads it back
(:data:`federation.applications.helmchart.MANIFEST_LIMITS`)."""
MEMORY = 1 << 30
"""Address space of one ``helm template``: Go's runtime reserves some 700 MiB of it before
it runs anything (below that Helm does not start), a typical chart then needs tens of
MiB more."""
_PR_SET_PDEATHSIG = 1


def answer(request: Mapping[str, Any]) -> JSON:
    """The answer to one request; every failure is an answer, never raised."""
    try:
        memory = min(int(request.get("memory") or MEMORY), MEMORY)
        archive = base64.b64decode(str(request["archive"]), validate=True)
        timeout = float(request["timeout"])
        with tempfile.TemporaryDirectory(prefix="federation-helm-") as work:
            return _render(Path(work), archive, request, timeout, memory)
    except (KeyError, TypeError, ValueError) as exc:
        return {"error": f"not a render request ({type(exc).__name__})", "reason": REFUSED}
    except OSError as exc:
        return {"error": f"helm could not run ({exc.strerror or type(exc).__name__})",
                "reason": REFUSED}


def _render(work: Path, archive: bytes, request: Mapping[str, Any], timeout: float,
            memory: int) -> JSON:
    (work / "chart.tgz").write_bytes(archive)
    (work / "values.json").write_text(json.dumps(request.get("values") or {}))
    command = [str(request["helm"]), "template", str(request["release"]), "chart.tgz",
               "--namespace", str(request["namespace"]), "--values", "values.json"]
    if request.get("includeCRDs"):
        command.append("--include-crds")
    if request.get("skipTests", True):
        command.append("--skip-tests")
    if request.get("skipHooks"):
        command.append("--no-hooks")
    out, err = work / "out.yaml", work / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        try:
            code = subprocess.run(command, cwd=work, env=_environment(work),
                                  stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                  timeout=timeout, preexec_fn=_limits(timeout, memory),
                                  check=False).returncode
        except subprocess.TimeoutExpired:
            return {"error": f"helm template took longer than {timeout:g}s (the limit)",
                    "reason": REFUSED}
    return _result(code, out, err)


def _result(code: int, out: Path, err: Path) -> JSON:
    if code == -signal.SIGXCPU or code == -signal.SIGKILL:
        return {"error": "helm template used more CPU time than its limit", "reason": REFUSED}
    if code == -signal.SIGXFSZ or out.stat().st_size >= MAX_OUTPUT:
        return {"error": f"the chart renders more than {MAX_OUTPUT // 2**20} MiB",
                "reason": REFUSED}
    if code != 0:
        return {"error": _helm_error(err.read_bytes()[:4096], code), "reason": REFUSED}
    return {"manifest": out.read_bytes().decode("utf-8", "replace")}


def _helm_error(stderr: bytes, code: int) -> str:
    """Helm's error line (``Error: ...``; a Go runtime's out-of-memory says so)."""
    text = stderr.decode("utf-8", "replace")
    if any(words in text for words in ("out of memory", "cannot allocate memory",
                                       "failed to reserve")):
        return "helm template ran out of memory (its limit)"
    lines = [line for line in text.splitlines() if line.startswith("Error:")]
    found = lines[-1].removeprefix("Error:").strip() if lines else f"helm exited with {code}"
    return one_line(found, 300)


def _environment(work: Path) -> dict[str, str]:
    """Only Helm's own directories, all in ``work``: no credentials, proxy or kubeconfig of
    the control plane's reach the chart's render. One Go thread (a render is sequential;
    the CPU limit counts every thread) and a garbage collector that works hard before the
    address-space limit is reached."""
    home = str(work)
    return {"HOME": home, "PATH": "/nonexistent", "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config", "HELM_DATA_HOME": f"{home}/data",
            "KUBECONFIG": f"{home}/no-kubeconfig", "GOMAXPROCS": "1",
            "GOMEMLIMIT": "256MiB"}


def _limits(timeout: float, memory: int) -> Callable[[], None]:
    def apply() -> None:
        cpu = math.ceil(timeout)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_OUTPUT, MAX_OUTPUT))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        os.nice(5)
    return apply


def serve(requests: IO[bytes], answers: IO[bytes],
          arm: Callable[[bool], object] = lambda on: None) -> None:
    """The worker's loop (the rollouts workers' line protocol)."""
    analysis.serve(requests, answers, arm, answer_with=answer)
