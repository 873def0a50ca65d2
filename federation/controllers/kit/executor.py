"""The one writer: plans are executed through :class:`Writer`, over the multi-cluster client.

:func:`execute` is :func:`federation.controllers.kit.plan.execute` with this controller's
two rules on top: a create, update or apply of a denied object in a member is refused
here too, whatever planned it (:class:`Writer`), and creating a dependency several
templates share (their Namespace, a CRD) counts as done when it already exists
(:class:`SharedCreates`: 409 AlreadyExists because another template's reconcile made it
first). Nothing else in the package holds a client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from federation.contexts.client import ApiError
from federation.contexts.multicluster import MultiCluster
from federation.controllers.kit import plan
from federation.hub import api, deny

JSON = dict[str, Any]


async def execute(dag: plan.Plan, writer: plan.Writer, shared: Iterable[str] = ()
                  ) -> plan.Report:
    return await plan.execute(dag, SharedCreates(writer, set(shared)))


class SharedCreates:
    """The executor's writer for one plan: creating a dependency several templates share
    (their Namespace, a CRD) counts as done when it already exists (409 AlreadyExists:
    another template's reconcile made it first). Other writes pass through unchanged."""

    def __init__(self, writer: plan.Writer, shared: set[str]) -> None:
        self.writer = writer
        self.shared = shared

    async def create(self, cluster: str, obj: JSON) -> JSON:
        try:
            return await self.writer.create(cluster, obj)
        except ApiError as exc:
            if exc.status == 409 and exc.reason == "AlreadyExists" and \
                    plan.vertex_key(cluster, obj) in self.shared:
                return obj
            raise

    async def update(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.update(cluster, obj)

    async def apply(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.apply(cluster, obj)

    async def patch_status(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.patch_status(cluster, obj)

    async def delete(self, cluster: str, obj: JSON) -> JSON:
        return await self.writer.delete(cluster, obj)

    async def recreate(self, cluster: str, gone: JSON, obj: JSON) -> JSON:
        if not isinstance(self.writer, plan.Recreator):
            raise RuntimeError(f"{plan.REFUSED} {plan.Identity.of(obj)} in {cluster}: this "
                               "writer cannot recreate")
        return await self.writer.recreate(cluster, gone, obj)


class Writer:
    """The executor's writes, through the multi-cluster client only. A create, update or
    apply of a denied object in a member is refused here too, whatever planned it, and so
    is one of a namespaced object whose kind the member serves cluster-scoped.
    ``wrote`` hears the server's answer to every member create, update and apply (the
    kind tracker's :class:`~federation.controllers.kit.kinds.OwnWrites`, so that the watch
    event of our own write is not taken for news). ``vouched``: an object a whole-kind
    rule refuses that the caller's own code made and checked (the applications
    controller: an export-service step's Endpoints); the list's other rules still apply."""

    def __init__(self, mc: MultiCluster, hub: str,
                 denied: deny.DenyList | None = None,
                 wrote: Callable[[str, JSON], None] | None = None,
                 vouched: Callable[[JSON], bool] | None = None) -> None:
        self.mc = mc
        self.hub = hub
        self.denied = denied if denied is not None else deny.DenyList()
        self.wrote = wrote
        self.vouched = vouched

    def _written(self, cluster: str, answer: JSON) -> JSON:
        if self.wrote is not None and cluster != self.hub:
            self.wrote(cluster, answer)
        return answer

    async def _check(self, cluster: str, obj: JSON) -> None:
        if cluster == self.hub:
            return
        rules = await self._rules_for(obj)
        rule = rules.object_rule(obj)
        if rule is not None and rule.whole_kind and self.vouched is not None and \
                self.vouched(obj):
            rule = deny.DenyList(tuple(r for r in rules.rules if r != rule)).object_rule(obj)
        if rule is not None:
            raise deny.Denied(f"{plan.REFUSED} {plan.Identity.of(obj)} in {cluster} is on "
                              f"the propagation deny list ({rule})")
        if (obj.get("metadata") or {}).get("namespace"):
            # A kind's scope is the member's to say (a CRD may be namespaced on the hub and
            # cluster-scoped in a member): a namespaced object, which a namespace's owner
            # may write, never becomes a cluster-scoped one there.
            resource = await self.mc.cluster(cluster).resource(obj)
            if not resource.namespaced:
                raise deny.Denied(f"{plan.REFUSED} {plan.Identity.of(obj)} in {cluster}: "
                                  f"{resource.kind} is cluster-scoped there, and a "
                                  "namespaced object never becomes a cluster-scoped one")

    async def _rules_for(self, obj: JSON) -> deny.DenyList:
        """The list, and for a Secret also the namespaces joined clusters' kubeconfigs
        live in (the hub's MemberClusters, from its cache), as the planners apply it."""
        if deny.group_kind_of(obj) != deny.SECRET:
            return self.denied
        listing = await self.mc.list(api.MEMBER_CLUSTERS, clusters=[self.hub], copy=False)
        error = listing.errors.get(self.hub)
        if error is not None:
            raise error  # unknown credential namespaces: no Secret is written blind
        return self.denied.with_rules(deny.credential_rules(listing.items.get(self.hub, [])))

    async def create(self, cluster: str, obj: JSON) -> JSON:
        await self._check(cluster, obj)
        return self._written(cluster, await self.mc.cluster(cluster).create(obj))

    async def update(self, cluster: str, obj: JSON) -> JSON:
        await self._check(cluster, obj)
        return self._written(cluster, await self.mc.cluster(cluster).update(obj))

    async def apply(self, cluster: str, obj: JSON) -> JSON:
        """Server-side apply under our field manager, forcing (the fields sent are ours:
        another manager's were left out by the planner). The object's resourceVersion
        makes it conditional. An object carrying :data:`~.plan.ADOPT` first gets those
        ``managedFields`` (a merge patch, conditional too), then the apply, conditional on
        the patch's answer: two writes, once per object."""
        await self._check(cluster, obj)
        writer = self.mc.cluster(cluster)
        adopt = obj.get(plan.ADOPT)
        body = {key: value for key, value in obj.items() if key != plan.ADOPT}
        if adopt is not None:
            meta = body["metadata"]
            patched = await writer.patch(
                await writer.resource(body), meta["name"], {"metadata": {"managedFields": adopt}},
                namespace=meta.get("namespace"), resource_version=meta.get("resourceVersion"))
            version = (self._written(cluster, patched).get("metadata") or {}).get(
                "resourceVersion")
            body = {**body, "metadata": {**meta, "resourceVersion": version}}
        return self._written(cluster, await writer.apply(body))

    async def patch_status(self, cluster: str, obj: JSON) -> JSON:
        writer = self.mc.cluster(cluster)
        resource = await writer.resource(obj)
        meta = obj["metadata"]
        return await writer.patch_status(resource, meta["name"], {"status": obj["status"]},
                                         namespace=meta.get("namespace"))

    async def recreate(self, cluster: str, gone: JSON, obj: JSON) -> JSON:
        """:attr:`~.plan.Action.RECREATE`: ``obj`` is checked as its create would be
        before ``gone`` (an exact reference: that UID and resourceVersion only) is
        deleted, so a create this writer refuses deletes nothing; then the create. A
        ``gone`` already gone (404: an earlier recreate whose create failed, read from a
        cache that still showed it) is created all the same: a create never overwrites."""
        if cluster == self.hub:
            raise deny.Denied(f"{plan.REFUSED} {plan.Identity.of(obj)}: a recreate is a "
                              "member write")
        await self._check(cluster, obj)
        try:
            await self.delete(cluster, gone)
        except ApiError as exc:
            if exc.status != 404:
                raise
        return await self.create(cluster, obj)

    async def delete(self, cluster: str, obj: JSON) -> JSON:
        """Delete with the UID as a precondition, and the resourceVersion too when the
        reference asks for this exact version (:func:`~.plan.reference` ``exact``)."""
        writer = self.mc.cluster(cluster)
        meta = obj["metadata"]
        exact = obj.get(plan.PRECONDITIONS) or {}
        return await writer.delete(await writer.resource(obj), meta["name"],
                                   meta.get("namespace"), uid=meta.get("uid"),
                                   resource_version=exact.get("resourceVersion"))

