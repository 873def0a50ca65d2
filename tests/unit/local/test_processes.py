"""Pid files prove ownership: only processes we started are ever signalled."""

import json
import subprocess
import time
from pathlib import Path

from federation.local import processes


def test_spawned_process_is_owned_and_terminated(tmp_path: Path) -> None:
    """spawn records the process; terminate stops it and removes the pid file."""
    pid_file = tmp_path / "sleep.pid"
    pid = processes.spawn(["/bin/sleep", "60"], pid_file, tmp_path / "sleep.log")
    assert processes.owned_pid(pid_file) == pid
    assert processes.terminate(pid_file)
    assert processes.owned_pid(pid_file) is None and not pid_file.exists()


def test_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    """A live process whose start time differs from the record is left alone."""
    stranger = subprocess.Popen(["/bin/sleep", "60"])
    try:
        pid_file = tmp_path / "x.pid"
        pid_file.write_text(json.dumps({"pid": stranger.pid, "start_time": 1,
                                        "executable": "/bin/sleep"}))
        assert processes.owned_pid(pid_file) is None
        assert not processes.terminate(pid_file)
        time.sleep(0.1)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_frozen_process_is_reported_and_still_stoppable(tmp_path: Path) -> None:
    """A SIGSTOPped process reads as frozen and terminate still ends it."""
    import signal

    pid_file = tmp_path / "sleep.pid"
    processes.spawn(["/bin/sleep", "60"], pid_file, tmp_path / "sleep.log")
    assert processes.send(pid_file, signal.SIGSTOP)
    time.sleep(0.1)
    assert processes.is_frozen(pid_file)
    assert processes.terminate(pid_file, timeout=5)
