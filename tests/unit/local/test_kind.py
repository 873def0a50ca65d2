"""The kind provider's commands (kind itself cannot run here: no Docker engine)."""

from pathlib import Path

import pytest

from federation.local import kind


def test_create_commands_make_hub_and_members_with_one_kubeconfig() -> None:
    """One `kind create cluster` per cluster, all writing the same kubeconfig."""
    commands = kind.create_commands(2, Path("kc.yaml"))
    assert commands == [
        ["kind", "create", "cluster", "--name", name, "--kubeconfig", "kc.yaml", "--wait", "120s"]
        for name in ("hub", "member1", "member2")
    ]


def test_delete_commands_cover_every_cluster() -> None:
    """down deletes exactly the clusters up created."""
    assert kind.delete_commands(1) == [["kind", "delete", "cluster", "--name", "hub"],
                                       ["kind", "delete", "cluster", "--name", "member1"]]


def test_members_get_the_same_location_labels_as_the_local_fleet() -> None:
    """Placement selects on region/zone/provider whichever provider made the fleet."""
    command = kind.label_commands(2, Path("kc.yaml"))[1]
    assert command[:6] == ["kubectl", "--kubeconfig", "kc.yaml", "--context", "member2", "label"]
    assert "topology.kubernetes.io/region=eu-west-1" in command
    assert "federation.io/provider=gcp" in command


def test_kind_contexts_are_renamed() -> None:
    """kind-X contexts become X, the current context too; other contexts are untouched."""
    document = {"current-context": "kind-member1",
                "contexts": [{"name": "kind-hub"}, {"name": "kind-member1"}, {"name": "prod"}]}
    renamed = kind.rename_contexts(document)
    assert [c["name"] for c in renamed["contexts"]] == ["hub", "member1", "prod"]
    assert renamed["current-context"] == "member1"


def test_kind_without_docker_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no kind binary the error says what is missing."""
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(kind.KindError, match="needs the `kind` binary"):
        kind.check_available()
