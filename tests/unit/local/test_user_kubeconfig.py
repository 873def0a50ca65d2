"""`fedctl local up --export-kubeconfig`: the fleet's contexts in the user's kubeconfig
(kind's convenience), never overwriting an entry of the user's, and taken out again."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.local import user_kubeconfig

FLEET: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Config", "current-context": "hub",
    "clusters": [{"name": n, "cluster": {"server": f"https://127.0.0.1:{p}"}}
                 for n, p in (("hub", 1), ("member1", 2))],
    "users": [{"name": f"{n}-admin", "user": {"token": "x"}} for n in ("hub", "member1")],
    "contexts": [{"name": n, "context": {"cluster": n, "user": f"{n}-admin"}}
                 for n in ("hub", "member1")],
}
USERS: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Config", "current-context": "prod",
    "clusters": [{"name": "prod", "cluster": {"server": "https://prod.example:6443"}}],
    "users": [{"name": "me", "user": {"token": "secret"}}],
    "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me"}}],
}


def write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def names(path: Path, section: str) -> list[str]:
    return [e["name"] for e in yaml.safe_load(path.read_text())[section]]


def test_the_target_is_kubectls(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert user_kubeconfig.target({"KUBECONFIG": f"{first}{os.pathsep}{second}"}) == first
    assert user_kubeconfig.target({}) == Path.home() / ".kube" / "config"


def test_export_merges_makes_hub_current_and_down_restores(tmp_path: Path) -> None:
    fleet = write(tmp_path / "local.yaml", FLEET)
    mine = write(tmp_path / "home" / "config", USERS)
    state = tmp_path / "state"
    assert user_kubeconfig.export(fleet, state, mine) == ["hub", "member1"]
    assert names(mine, "contexts") == ["prod", "hub", "member1"]
    assert yaml.safe_load(mine.read_text())["current-context"] == "hub"
    assert stat.S_IMODE(mine.stat().st_mode) == 0o600
    user_kubeconfig.export(fleet, state, mine)  # up again: ours may be replaced
    assert names(mine, "users") == ["me", "hub-admin", "member1-admin"]
    assert user_kubeconfig.remove(state) == mine
    assert yaml.safe_load(mine.read_text()) == USERS
    assert user_kubeconfig.remove(state) is None  # nothing recorded any more


def test_a_new_file_is_created_private(tmp_path: Path) -> None:
    fleet = write(tmp_path / "local.yaml", FLEET)
    created = tmp_path / "new" / "config"
    user_kubeconfig.export(fleet, tmp_path / "state", created)
    assert names(created, "clusters") == ["hub", "member1"]
    assert stat.S_IMODE(created.stat().st_mode) == 0o600


@pytest.mark.parametrize("section", ["clusters", "users", "contexts"])
def test_an_entry_of_the_users_with_our_name_is_never_overwritten(tmp_path: Path,
                                                                  section: str) -> None:
    """A real cluster called hub: refused in one line, the file byte for byte as it was."""
    fleet = write(tmp_path / "local.yaml", FLEET)
    theirs = {**USERS, section: [*USERS[section],
                                 {**FLEET[section][0], "note": "the user's own"}]}
    mine = write(tmp_path / "config", theirs)
    before = mine.read_bytes()
    with pytest.raises(user_kubeconfig.ExportError, match=r"already has a .* named 'hub"):
        user_kubeconfig.export(fleet, tmp_path / "state", mine)
    assert mine.read_bytes() == before
    assert user_kubeconfig.remove(tmp_path / "state") is None


def test_down_keeps_a_current_context_the_user_chose_since(tmp_path: Path) -> None:
    fleet = write(tmp_path / "local.yaml", FLEET)
    mine = write(tmp_path / "config", USERS)
    user_kubeconfig.export(fleet, tmp_path / "state", mine)
    document = yaml.safe_load(mine.read_text())
    write(mine, {**document, "current-context": "prod"})
    user_kubeconfig.remove(tmp_path / "state")
    assert yaml.safe_load(mine.read_text())["current-context"] == "prod"


def test_an_unreadable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    fleet = write(tmp_path / "local.yaml", FLEET)
    broken = tmp_path / "config"
    broken.write_text("clusters: {not: a list}\n")
    with pytest.raises(user_kubeconfig.ExportError, match="clusters is not a list"):
        user_kubeconfig.export(fleet, tmp_path / "state", broken)
