"""Client-side rate limit: none by default (the server's APF decides), exact when set."""

from __future__ import annotations

import pytest

from federation.contexts import client as kube
from federation.contexts import kubeconfig


def context() -> kubeconfig.Context:
    return kubeconfig.Context(name="member1", server="https://127.0.0.1:1")


def test_no_client_side_limit_by_default() -> None:
    """controller-runtime's default since v0.21: no bucket, no waiting on our side."""
    assert kube.ClientSettings().qps is None
    assert kube.ClusterClient(context()).bucket is None


def test_a_set_qps_is_honoured_with_burst_twice_it_unless_given() -> None:
    bucket = kube.ClusterClient(context(), kube.ClientSettings(qps=20)).bucket
    assert bucket is not None and (bucket.rate, bucket.burst) == (20, 40)
    bucket = kube.ClusterClient(context(), kube.ClientSettings(qps=20, burst=5)).bucket
    assert bucket is not None and (bucket.rate, bucket.burst) == (20, 5)


@pytest.mark.parametrize(("qps", "burst", "flag"), [
    (None, 10, "--kube-api-burst needs --kube-api-qps"),
    (0.0, None, "--kube-api-qps must be > 0"),
    (-1.0, None, "--kube-api-qps must be > 0"),
    (10.0, 0, "--kube-api-burst must be >= 1"),
])
def test_meaningless_limits_are_refused_naming_the_flag(qps: float | None, burst: int | None,
                                                        flag: str) -> None:
    """A burst alone, or a limit that is not positive, is an error, never ignored."""
    with pytest.raises(ValueError, match=f"^{flag}"):
        kube.ClientSettings(qps=qps, burst=burst)
