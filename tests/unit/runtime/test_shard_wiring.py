"""Sharding's wiring: Lease names RBAC grants, settings refused by name, the key tables."""

from __future__ import annotations

import pytest

from federation.controllers import setup
from federation.hub import bindings
from federation.rbac import roles
from federation.runtime import manager, peers
from federation.runtime.reconcile import Request


def test_rbac_names_every_shard_lease_the_runtime_uses() -> None:
    assert roles.shard_lease_names("fcm") == (*peers.shard_names("fcm"), peers.seed_name("fcm"))
    assert roles.SHARD_LEASES == peers.MAX_SHARDS


def test_shards_without_an_election_are_refused() -> None:
    with pytest.raises(ValueError, match="leader election"):
        manager.ManagerSettings(shards=3)


def test_a_template_and_its_binding_are_one_key() -> None:
    """Clean-up of a template's copies runs where the template is reconciled."""
    template = Request("hub", "Deployment.apps", "shop", "Web_1")
    binding = Request("hub", "ResourceBinding.federation.io", "shop",
                      bindings.binding_name("Web_1", "Deployment"))
    assert setup.template_key(template) == setup.object_key(binding)


def test_cluster_wide_duties_are_not_sharded() -> None:
    keys = setup.shard_keys()
    assert set(keys) == {"propagation", "cleanup", "applications", "reconfigure"}
    assert "cluster-health" not in keys and setup.runs_on_every_replica("membership")
