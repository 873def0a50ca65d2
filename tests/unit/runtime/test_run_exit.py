"""`fedctl run` failing at start: one error line, status 1, and no warning noise.

These run the real command in a subprocess (with ResourceWarnings shown), against a
hub address where nothing listens: the connection is refused at once, so no test
waits on a timeout.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from federation.commands import run as run_command

pytestmark = pytest.mark.timeout(60)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hub",
        "clusters": [{"name": "hub", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "secret-token-value"}}],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "u"}},
                     {"name": "member1", "context": {"cluster": "hub", "user": "u"}}]}))
    return path


def fedctl_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-X", "dev", "-m", "federation",
         "run", "--metrics-bind-address", "0", "--health-probe-bind-address", "0", *args],
        capture_output=True, text=True, timeout=50)


@pytest.mark.parametrize("leader_elect", [False, True])
def test_an_unreachable_hub_fails_cleanly(tmp_path: Path, leader_elect: bool) -> None:
    """Exit 1 with one error line; no 'Unclosed client session', no un-awaited coroutine."""
    config = kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}")
    result = fedctl_run("--kubeconfig", str(config), "--hub-context", "hub",
                        *(["--leader-elect"] if leader_elect else []))
    assert result.returncode == 1, result.stderr
    assert "error: cannot install the hub API" in result.stderr
    for noise in ("Unclosed", "ResourceWarning", "never awaited", "Traceback"):
        assert noise not in result.stderr, result.stderr
    assert "secret-token-value" not in result.stderr + result.stdout


def test_a_bad_kubeconfig_or_certificate_dir_fails_cleanly(tmp_path: Path) -> None:
    """Errors found before any connection: one line each, naming what is wrong."""
    config = kubeconfig(tmp_path, "https://127.0.0.1:1")
    missing = fedctl_run("--kubeconfig", str(config), "--hub-context", "nope")
    assert missing.returncode == 1 and "nope" in missing.stderr
    certs = fedctl_run("--kubeconfig", str(config), "--metrics-secure",
                       "--metrics-cert-dir", str(tmp_path))
    assert certs.returncode == 1 and "--metrics-cert-dir" in certs.stderr
    assert "tls.crt" in certs.stderr
    burst = fedctl_run("--kubeconfig", str(config), "--kube-api-burst", "10")
    assert burst.returncode == 1
    assert "error: --kube-api-burst needs --kube-api-qps" in burst.stderr
    for result in (missing, certs, burst):
        for noise in ("Unclosed", "ResourceWarning", "Traceback"):
            assert noise not in result.stderr, result.stderr


def test_tls_bytes_after_a_deliberate_close_are_not_reported_as_fatal(
        caplog: pytest.LogCaptureFixture) -> None:
    """uvloop's 'Fatal error on SSL protocol ... handler is closed' after we cancelled a
    request is DEBUG; any other loop error still reaches the default handler."""
    loop = asyncio.new_event_loop()
    try:
        caplog.set_level(logging.DEBUG)
        closed = RuntimeError("unable to perform operation on <TCPTransport closed=True>; "
                              "the handler is closed")
        run_command.quiet_closed_tls(loop, {"message": "Fatal error on SSL protocol",
                                            "exception": closed})
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        run_command.quiet_closed_tls(loop, {"message": "Task exception was never retrieved",
                                            "exception": RuntimeError("boom")})
        assert [r for r in caplog.records if r.levelno >= logging.ERROR]
    finally:
        loop.close()
