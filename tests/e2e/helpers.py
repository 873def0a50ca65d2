"""Small helpers shared by e2e tests: waiting, reading and applying with kubectl."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import TestFleet, kubectl_binary


def wait_for(condition: Callable[[], Any], timeout: float = 30, interval: float = 0.2,
             what: str = "condition") -> Any:
    """Poll until ``condition()`` is truthy and return it; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(interval)


def get_json(fleet: TestFleet, context: str, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(fleet.kubectl(context, "get", *args, "-o", "json").stdout)
    return found


def get_or_none(fleet: TestFleet, context: str, *args: str) -> dict[str, Any] | None:
    result = fleet.kubectl(context, "get", *args, "-o", "json", check=False)
    if result.returncode != 0:
        if any(text in result.stderr for text in
               ("NotFound", "not found", "doesn't have a resource type")):
            return None
        raise AssertionError(f"kubectl get {' '.join(args)}: {result.stderr.strip()}")
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def apply(fleet: TestFleet, context: str, *manifests: dict[str, Any]) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": list(manifests)}
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", context,
         "apply", "-f", "-"], input=json.dumps(document), text=True, capture_output=True,
        timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"kubectl apply failed: {result.stderr.strip()}")


def free_port() -> int:
    """A loopback port nobody holds now (the process told to bind it does so a moment
    later; tests accept that race, as every port-0-then-rebind test does)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
