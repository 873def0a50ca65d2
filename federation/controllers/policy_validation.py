"""Policy validation on the hub: a ``Valid`` condition and an event per policy.

Policy CRDs keep their spec schema open (unknown fields preserved) so that a
typo reaches our validation, which names it, instead of being pruned in
silence by the API server. This controller runs that validation on every
policy change and writes the verdict as the policy's ``Valid`` condition
(shown by ``kubectl get pp``) plus a Warning event when it is invalid. Invalid
policies place nothing; the propagation controller skips them.

An override policy is also invalid when a rule would change a protected field
(identity, ownership, our marks: :func:`federation.hub.overrides.refusals`);
every such rule is named. A propagation policy that selects what the deny list
keeps on the hub (:mod:`federation.hub.deny`) gets a ``Denied``
condition naming each rule and what it skips, and a Warning event; it stays
valid for everything else it selects. A valid propagation policy whose
``schedulerName`` is not ours (``default-scheduler``) gets ``Scheduled=False``,
reason ``SchedulerNotOurs``: it is left to that scheduler (its templates' bindings
say so too).
"""

from __future__ import annotations

from typing import Any

from federation.contexts.cache import ReadOnly
from federation.contexts.client import Resource
from federation.contexts.multicluster import MultiCluster
from federation.controllers.kit import events, secrets
from federation.hub import api, deny, overrides, status
from federation.placement import loader
from federation.placement import policy as policy_
from federation.runtime.reconcile import Request, Result, group_kind

JSON = dict[str, Any]
BY_KIND = {group_kind(r): r for r in api.POLICY_RESOURCES}
"""Policy resources by a request's ``Kind.group``: ours and Karmada's, validated the same."""


def problem(doc: ReadOnly) -> str | None:
    """Why the policy is invalid (field path and message), or None."""
    body = {k: v for k, v in doc.items() if k != "status"}
    where = f"{doc.get('kind')} {doc['metadata'].get('name')}"
    try:
        if doc.get("kind") in overrides.KINDS:
            overrides.validate(body)
        else:
            loader.parse_policy(body, where)
    except loader.LoadError as exc:
        return f"{exc.path}: {exc.message}" if exc.path else exc.message
    except overrides.OverrideError as exc:
        return str(exc)
    return None


def foreign_scheduler(doc: ReadOnly) -> str | None:
    """The note for a propagation policy another scheduler places, or None."""
    name = (doc.get("spec") or {}).get("schedulerName")
    if doc.get("kind") in overrides.KINDS or not name or name == policy_.DEFAULT_SCHEDULER:
        return None
    return (f"spec.schedulerName is {str(name)[:253]!r}: left to that scheduler; this control "
            f"plane ({policy_.DEFAULT_SCHEDULER!r}) places nothing for it")


def denials(doc: ReadOnly, rules: deny.DenyList) -> str | None:
    """What a propagation policy selects that is never propagated, or None."""
    if doc.get("kind") in overrides.KINDS:
        return None
    found = rules.policy_denials(doc)
    if not found:
        return None
    return "never propagated (deny list): " + "; ".join(found)


GRANTS_RECHECK = 1.0
"""Seconds before a policy selecting Secrets is looked at again while the grants are
still being listed (their first list comes within a second or two)."""


class Reconciler:
    def __init__(self, mc: MultiCluster, hub: str, recorder: events.EventSink,
                 rules: deny.DenyList | None = None,
                 access: secrets.Granted | None = None) -> None:
        self.mc = mc
        self.hub = hub
        self.recorder = recorder
        self.rules = rules if rules is not None else deny.DenyList()
        self.access = access

    async def reconcile(self, request: Request) -> Result | None:
        resource: Resource = BY_KIND[request.kind]
        doc = await self.mc.get(resource, request.name, request.namespace or None,
                                cluster=self.hub, copy=False)
        if doc is None:
            return None
        found = problem(doc)
        denied = await self._denials(doc)
        previous = (doc.get("status") or {}).get("conditions") or []
        conditions = [status.condition("Valid", found is None,
                                       "Valid" if found is None else "Invalid",
                                       found or "policy is valid", previous)]
        if denied is not None:
            conditions.append(status.condition("Denied", True, "DenyList", denied, previous))
        readable = self._readable(doc)
        if isinstance(readable, str):  # the grants are being listed
            return Result(requeue_after=GRANTS_RECHECK)
        if readable is not None:
            ok, reason, message = readable
            conditions.append(status.condition(secrets.CONDITION, ok, reason, message,
                                               previous))
        foreign = foreign_scheduler(doc) if found is None else None
        if foreign is not None:
            conditions.append(status.condition("Scheduled", False, "SchedulerNotOurs", foreign,
                                               previous))
        if _same(previous, conditions):
            return None
        if found is not None:
            await self.recorder.emit(doc, "Warning", "InvalidPolicy", found)
        if denied is not None:
            await self.recorder.emit(doc, "Warning", "Denied", denied)
        if readable is not None and not readable[0]:
            await self.recorder.emit(doc, "Warning", "SecretsNotReadable", readable[2])
        meta = doc["metadata"]
        await self.mc.cluster(self.hub).patch_status(
            resource, meta["name"], {"status": {"conditions": conditions}},
            namespace=meta.get("namespace"))
        return None

    def _readable(self, doc: ReadOnly) -> tuple[bool, str, str] | str | None:
        """The :data:`~federation.controllers.kit.secrets.CONDITION` of a policy selecting
        Secrets; "wait" while the grants are being listed; None for any other policy."""
        if self.access is None or not secrets.selected_namespaces(doc):
            return None
        granted = self.access.granted()
        if granted is None:
            return "wait"
        if isinstance(granted, str):
            return False, "GrantsUnknown", granted
        return secrets.readable(doc, granted)

    async def _denials(self, doc: ReadOnly) -> str | None:
        """:func:`denials`, counting the namespaces MemberClusters keep credentials in."""
        rules = self.rules
        if doc.get("kind") not in overrides.KINDS:
            listing = await self.mc.list(api.MEMBER_CLUSTERS, clusters=[self.hub], copy=False)
            rules = rules.with_rules(deny.credential_rules(listing.items.get(self.hub, [])))
        return denials(doc, rules)


def _same(previous: list[JSON], conditions: list[JSON]) -> bool:
    """The status already says this (the same condition types, statuses and messages)."""
    def key(items: list[JSON]) -> set[tuple[str, str, str]]:
        return {(str(c.get("type")), str(c.get("status")), str(c.get("message")))
                for c in items}
    return key(previous) == key(conditions)
