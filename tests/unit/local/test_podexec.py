"""The container launcher: what it applies, and that nothing starts when it cannot."""

from __future__ import annotations

import subprocess
import sys

import pytest


def launch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "federation.local.podexec", *args],
                          capture_output=True, text=True, timeout=30)


def test_it_drops_every_capability_and_sets_no_new_privileges() -> None:
    done = launch("--drop-capabilities", "--no-new-privileges", "--", "/bin/cat",
                  "/proc/self/status")
    assert done.returncode == 0, done.stderr
    fields = dict(line.split(":\t", 1) for line in done.stdout.splitlines() if ":\t" in line)
    for capability in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
        assert fields[capability].strip() == "0000000000000000", capability
    assert fields["NoNewPrivs"].strip() == "1"


def test_without_options_it_only_execs() -> None:
    done = launch("--", "/bin/cat", "/proc/self/status")
    assert done.returncode == 0 and "NoNewPrivs:\t0" in done.stdout


@pytest.mark.parametrize(("args", "status", "message"), [
    ((), 2, "usage"), (("--privileged", "--", "/bin/true"), 2, "unknown option --privileged"),
    (("--",), 2, "no command"),
    (("--drop-capabilities", "--", "/nonexistent/program"), 126, "/nonexistent/program"),
])
def test_a_bad_command_line_or_a_failure_starts_nothing(args: tuple[str, ...], status: int,
                                                        message: str) -> None:
    done = launch(*args)
    assert done.returncode == status
    assert message in done.stderr and "Traceback" not in done.stderr
