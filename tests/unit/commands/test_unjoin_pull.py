"""docs/install.md, "Uninstalling": `fedctl unjoin NAME --orphan` of a pull member patches
its copies with the context named NAME of --kubeconfig (the hub holds no credentials of a
pull member), and one missing is an error naming it, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from federation.commands import join
from federation.contexts import kubeconfig
from federation.contexts.client import JSON, Resource
from tests.unit.clients import Unserved


class Hub(Unserved):
    """A hub that must not be asked for a Secret (a pull member has none)."""

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        raise AssertionError("a pull member has no kubeconfig Secret to read")


def config(*contexts: str) -> kubeconfig.KubeConfig:
    return kubeconfig.merge([(Path("hub.yaml"), {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": c, "cluster": {"server": f"https://{c}.example:6443"}}
                     for c in contexts],
        "users": [{"name": c, "user": {"token": "t"}} for c in contexts],
        "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in contexts]})])


PULL = {"metadata": {"name": "edge"}, "spec": {"mode": "Pull"}}


async def test_a_pull_members_copies_are_patched_with_its_named_context() -> None:
    found = await join._member_context(Hub(), config("hub", "edge"), PULL)
    assert found.name == "edge" and found.server == "https://edge.example:6443"


async def test_without_that_context_the_error_names_it() -> None:
    with pytest.raises(kubeconfig.KubeconfigError, match="edge"):
        await join._member_context(Hub(), config("hub"), PULL)
