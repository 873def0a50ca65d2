"""Looking for Helm never fails start-up: a candidate path that cannot be looked at (the
image run as an arbitrary uid whose HOME is unreadable) is no Helm."""

from __future__ import annotations

from pathlib import Path

import pytest

from federation.local import helm


def test_an_unreadable_candidate_is_no_helm(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    def refused(self: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_file", refused)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(helm.ENV, raising=False)
    assert helm.find() is None
    assert helm.find(str(tmp_path / "helm")) is None


def test_an_executable_file_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    binary = tmp_path / "helm"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert helm.find(str(binary)) == binary
