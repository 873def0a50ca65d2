"""Availability listeners: work blocked by an absent member is retried when it returns."""

from federation.contexts import clusters


def test_listeners_hear_changes_only() -> None:
    """A listener is called when availability flips, not on every probe."""
    hub = clusters.Cluster("hub", is_hub=True, is_member=False)
    member = clusters.Cluster("m1")
    cluster_set = clusters.ClusterSet([hub, member])
    heard: list[tuple[str, bool | None]] = []
    cluster_set.on_member_availability(lambda c: heard.append((c.name, c.available)))
    member._set_available(True, None)
    member._set_available(True, None)
    member._set_available(False, "refused")
    member._set_available(True, None)
    assert heard == [("m1", True), ("m1", False), ("m1", True)]
    hub._set_available(True, None)
    assert len(heard) == 3
