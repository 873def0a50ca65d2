"""Small pure pieces of contexts: token buckets, selectors, stores, placement, exec output."""

from __future__ import annotations

import json

import pytest

from federation.contexts import cache, credentials, ratelimit, selectors
from federation.contexts.client import retry_after
from federation.runtime.manager import parse_bind_address


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_allows_burst_then_paces_at_rate() -> None:
    """burst tokens are free; after that each costs 1/rate seconds, and time refills them."""
    clock = Clock()
    bucket = ratelimit.TokenBucket(rate=10, burst=2, clock=clock)
    assert [bucket.reserve(), bucket.reserve()] == [0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    clock.now = 10.0
    assert bucket.reserve() == 0.0


@pytest.mark.parametrize(("text", "labels", "expected"), [
    ("a=b", {"a": "b"}, True),
    ("a==b", {"a": "c"}, False),
    ("a!=b", {}, True),
    ("a in (x, y),b", {"a": "y", "b": ""}, True),
    ("a notin (x,y)", {"a": "x"}, False),
    ("!a", {"a": "1"}, False),
    ("app=web,tier in (front)", {"app": "web", "tier": "front"}, True),
    ("", {"anything": "x"}, True),
])
def test_label_selectors_match_like_kubectl(text: str, labels: dict[str, str],
                                            expected: bool) -> None:
    """Equality, set and existence terms select as `kubectl -l` does."""
    assert selectors.parse(text).matches(labels) is expected


def test_bad_selector_is_rejected() -> None:
    """A selector that does not parse raises SelectorError naming the term."""
    with pytest.raises(selectors.SelectorError, match="a in"):
        selectors.parse("a in")


def test_store_indexes_follow_updates_and_deletes() -> None:
    """namespace, owner and label indexes track puts, replacements and removals."""
    store = cache.Store()
    obj = {"metadata": {"name": "x", "namespace": "ns", "labels": {"app": "a"},
                        "ownerReferences": [{"uid": "u1"}], "managedFields": [{}]}}
    store.put(cache.strip(obj))
    assert "managedFields" not in obj["metadata"]
    assert store.by_index("owner", "u1") == [obj]
    assert store.list("ns", selectors.parse("app=a")) == [obj]
    changed = {"metadata": {"name": "x", "namespace": "ns", "labels": {"app": "b"}}}
    assert store.put(changed) is obj
    assert store.by_index("label", "app=a") == [] and store.by_index("owner", "u1") == []
    assert store.by_index("label", "app=b") == [changed]
    store.remove(("ns", "x"))
    assert len(store) == 0 and store.list("ns") == []


def test_exec_credential_parsing_never_echoes_secrets() -> None:
    """ExecCredential output yields token and expiry; malformed output errors without content."""
    version = "client.authentication.k8s.io/v1"
    good = json.dumps({"apiVersion": version, "kind": "ExecCredential", "status": {
        "token": "tok-secret", "expirationTimestamp": "2030-01-01T00:00:00Z"}}).encode()
    credential = credentials.parse_exec_credential("c", version, good)
    assert credential.token == "tok-secret" and credential.expires_at == 1893456000.0
    assert "tok-secret" not in repr(credential)
    bad = json.dumps({"apiVersion": version, "kind": "ExecCredential",
                      "status": {"tokn": "tok-secret"}}).encode()
    with pytest.raises(credentials.CredentialsError) as error:
        credentials.parse_exec_credential("c", version, bad)
    assert "tok-secret" not in str(error.value)


def test_retry_after_header_is_honoured_and_capped() -> None:
    """Retry-After seconds are used as given, 1 s when absent or odd, never above the cap."""
    assert retry_after({"Retry-After": "3"}, 10) == 3
    assert retry_after({}, 10) == 1
    assert retry_after({"Retry-After": "soon"}, 10) == 1
    assert retry_after({"Retry-After": "120"}, 10) == 10


def test_bind_addresses_parse_like_controller_runtime() -> None:
    """':8080' is every interface, '0' turns the server off."""
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("0") is None
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_bind_address("localhost")
