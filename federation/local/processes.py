"""Background processes owned by the local fleet, tracked by pid files.

A pid file alone is not proof of ownership: pids are reused. Each pid file
therefore records the pid, the process start time (field 22 of
``/proc/PID/stat``) and the executable, and a process counts as ours only when
all three still match. ``down`` and ``stop`` signal only such processes, so
they can never kill an unrelated program that inherited a recycled pid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

STOP_TIMEOUT = 15.0
"""Seconds to wait after SIGTERM before SIGKILL: etcd and kube-apiserver drain in
well under a second on loopback, but a loaded 2-core machine can stall them."""


@dataclasses.dataclass(frozen=True)
class Record:
    pid: int
    start_time: int
    executable: str


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is parenthesised and may contain spaces.
    return raw[raw.rfind(")") + 2:].split()


def _start_time(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def read(pid_file: Path) -> Record | None:
    try:
        data = json.loads(pid_file.read_text())
        return Record(pid=int(data["pid"]), start_time=int(data["start_time"]),
                      executable=str(data["executable"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def owned_pid(pid_file: Path) -> int | None:
    """The pid recorded in ``pid_file`` if that process is alive and still the one we started."""
    record = read(pid_file)
    if record is None:
        return None
    _reap(record.pid)
    state = _state(record.pid)
    if state is None or state in ("Z", "X"):
        return None
    if _start_time(record.pid) != record.start_time:
        return None
    try:
        executable = os.readlink(f"/proc/{record.pid}/exe")
    except OSError:
        return None
    if executable != record.executable:
        return None
    return record.pid


def is_frozen(pid_file: Path) -> bool:
    pid = owned_pid(pid_file)
    return pid is not None and _state(pid) == "T"


def spawn(argv: Sequence[str], pid_file: Path, log_file: Path,
          env: dict[str, str] | None = None) -> int:
    """Start ``argv`` in its own session, detached from the terminal, logging to ``log_file``."""
    proc = popen(argv, pid_file, log_file, env=env)
    if not pid_file.exists():
        proc.wait()
        raise RuntimeError(f"{argv[0]} exited immediately; see {log_file}")
    return proc.pid


def popen(argv: Sequence[str], pid_file: Path, log_file: Path, *,
          env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """:func:`spawn`, returning the process (whose exit status its starter may collect).
    A process that is gone before its record could be read gets no pid file."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.unlink(missing_ok=True)
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env=env, cwd=cwd,
        )
    # Popen returns after exec, so /proc/PID/exe is already the program we asked for,
    # with symlinks (a virtualenv's python3) resolved as the kernel sees it.
    start_time = _start_time(proc.pid)
    try:
        executable = os.readlink(f"/proc/{proc.pid}/exe")
    except OSError:
        start_time = None
    if start_time is None:
        return proc
    tmp = pid_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": proc.pid, "start_time": start_time,
                               "executable": executable}))
    tmp.rename(pid_file)
    return proc


def terminate(pid_file: Path, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the process of ``pid_file`` if it is ours; True when one was stopped."""
    pid = owned_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    _signal(pid, signal.SIGTERM)
    _signal(pid, signal.SIGCONT)  # a frozen process cannot act on SIGTERM until it runs
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and owned_pid(pid_file) == pid:
        time.sleep(0.05)
    if owned_pid(pid_file) == pid:
        _signal(pid, signal.SIGKILL)
        while owned_pid(pid_file) == pid:
            time.sleep(0.05)
    pid_file.unlink(missing_ok=True)
    return True


def send(pid_file: Path, sig: signal.Signals) -> bool:
    pid = owned_pid(pid_file)
    if pid is None:
        return False
    _signal(pid, sig)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
