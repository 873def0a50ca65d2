"""fedctl join/unjoin pieces: the objects join writes, labels, what unjoin waits for."""

from __future__ import annotations

from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from federation.commands import join


def test_objects_reference_the_secret_and_hold_one_context() -> None:
    """The MemberCluster points at the Secret; the Secret holds the minified kubeconfig."""
    document = {"apiVersion": "v1", "kind": "Config", "contexts": [{"name": "edge"}]}
    secret, member = join.objects("edge", document, {"tier": "gold"},
                                  {"region": "eu", "zone": "", "provider": "aws"})
    assert secret["metadata"] == {"name": "edge-kubeconfig", "namespace": "federation-system",
                                  "labels": {"federation.io/member-cluster": "edge"}}
    assert yaml.safe_load(secret["stringData"]["kubeconfig"]) == document
    assert member["spec"] == {"kubeconfigSecretRef": {"name": "edge-kubeconfig",
                                                      "namespace": "federation-system",
                                                      "key": "kubeconfig"},
                              "region": "eu", "provider": "aws"}
    assert member["metadata"]["labels"] == {"tier": "gold"}


def test_labels_are_parsed_strictly() -> None:
    """k=v pairs, comma-separated; anything else is a usage error."""
    assert join.parse_labels("a=1, b=two") == {"a": "1", "b": "two"}
    assert join.parse_labels(None) == {}
    with pytest.raises(click.BadParameter):
        join.parse_labels("novalue")


def test_placed_on_reads_decisions_and_pending_cleanup() -> None:
    """A binding holds a member while its decision or its pending clean-up names it."""
    bindings: list[dict[str, Any]] = [
                {"spec": {"clusters": [{"name": "edge", "replicas": 2}],
                          "resource": {"kind": "Deployment", "namespace": "a", "name": "w"}}},
                {"spec": {"clusters": [{"name": "member1"}]},
                 "status": {"pendingCleanup": ["edge"]}},
                {"spec": {"clusters": [{"name": "member1"}]}}]
    assert join.placed_on(bindings, "edge") == bindings[:2]
    assert join.describe(bindings[0]) == "Deployment a/w"


def test_bad_name_is_refused_before_anything_is_read() -> None:
    """A NAME that is not a DNS label is a usage error."""
    result = CliRunner().invoke(join.join, ["Bad_Name", "--kubeconfig", "/nonexistent"])
    assert result.exit_code == 2
    assert "not a DNS label" in result.output
