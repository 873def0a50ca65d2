"""Hub policy objects as placement policies, and the kinds they select."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from federation.hub import parsed
from federation.placement import loader
from federation.placement import policy as policy_


def parse_policy(doc: Mapping[str, Any]) -> policy_.Policy | None:
    """A hub policy object as a placement policy; invalid ones are None (they carry a
    Valid=False condition of their own, see :mod:`federation.controllers.policy_validation`).
    Parsed once per version of the object (:mod:`federation.hub.parsed`)."""
    return _parsed(doc)


def _parse(doc: Mapping[str, Any]) -> policy_.Policy | None:
    body = {k: v for k, v in doc.items() if k != "status"}
    try:
        return loader.parse_policy(body, f"{doc.get('kind')} {doc['metadata'].get('name')}")
    except loader.LoadError:
        return None


_parsed = parsed.Memo(_parse)


def selected_kinds(policies: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(apiVersion, kind) pairs the policies' resourceSelectors name (even if invalid)."""
    found = set()
    for doc in policies:
        for selector in (doc.get("spec") or {}).get("resourceSelectors") or []:
            if isinstance(selector, dict) and selector.get("apiVersion") and \
                    selector.get("kind"):
                found.add((str(selector["apiVersion"]), str(selector["kind"])))
    return found
