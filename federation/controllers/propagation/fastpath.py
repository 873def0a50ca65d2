"""The fast path: a reconcile that tells from its binding that nothing it reads changed.

A full reconcile is a deterministic function of what it reads: the template, its binding,
every object the transformer chain and the record read through the context (policies,
overrides, MemberClusters, customizations, priority classes, reconfigure policies, the
members' namespaces, CRDs and copies, the dependencies a template carries), the
ClusterSet's members, the code and the settings. :class:`Recording` wraps the context for
one reconcile and notes each read with the version it saw (``uid@resourceVersion``; for
MemberClusters the placement view of each, below). When the round ends **settled** (every
write succeeded, nothing pending, held, evicted, suspended, waiting for room or asking to
be looked at again, see :func:`settled`), the record's binding carries the list of those
reads and a digest of their values *as the round leaves them* (a copy or a template
status we wrote counts at the version the server answered), with the digest of the
binding's own record and of the code and settings (:data:`ANNOTATION`).

The next reconcile of the template first reads the same objects again from the caches
and digests them (:func:`unchanged`): equal, and the full reconcile would read exactly
what the last one left, decide the same, find every copy as it wrote it and write
nothing; it stops there. Anything else (no or an unreadable annotation, another version of
any read, a read that fails) runs the full reconcile. So a changed copy (drift) is
repaired as before: its resourceVersion is not the one we wrote or last saw.

MemberClusters are digested by what placement reads of them, not by version (the health
controller rewrites their status every few seconds): labels, spec, the conditions' types
and statuses, ``availableReplicas``, deletion, and the resource summary in full only when
the policy's placement can use room (:func:`federation.placement.engine.room_matters`),
else only whether there is one.

The clock is not an input: a round whose outcome depends on it (a toleration or grace
period running, a requeue) is not settled, so it leaves no fingerprint. The read keys are
written by us but stored where a tenant with write access to bindings could change them:
a read outside the template's namespace (or cluster scope), of a resource the chain does
not read, or too many of them, is refused (the full path runs); a forged digest cannot
match, since it covers values (uids) the tenant cannot read.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from federation.contexts.cache import ReadOnly
from federation.contexts.client import NAMESPACES, ClientError, Resource
from federation.contexts.scoped import NotGranted
from federation.controllers.kit import plan
from federation.controllers.kit.interpreting import Interpreting
from federation.controllers.kit.view import Member
from federation.controllers.propagation import disruption, rollouts, scheduling
from federation.controllers.propagation.build import Build
from federation.controllers.propagation.context import TransformContext
from federation.controllers.propagation.settings import PropagationSettings
from federation.hub import api, bindings, deny, dependencies
from federation.hub import failover as failover_
from federation.hub import rollouts as hub_rollouts

ANNOTATION = "federation.io/reconciled-inputs"
"""On the binding: the reads of the last settled round and the digest of their values."""
FORMAT = "f2"
MAX_READS = 64
"""Reads a fingerprint may list (a template carrying many dependencies goes the full way)."""
MAX_ANNOTATION = 8192
"""Bytes of annotation read, and of JSON it may decompress to (8 times as many)."""

BINDING_KINDS = (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS)
READABLE: frozenset[Resource] = frozenset((
    *api.POLICY_RESOURCES, api.MEMBER_CLUSTERS, api.INTERPRETER_CUSTOMIZATIONS,
    api.PRIORITY_CLASSES, api.CRDS, hub_rollouts.RECONFIGURE_POLICIES, NAMESPACES,
    *dependencies.KINDS.values()))
"""What the chain reads besides the template's own kind (its copies): a key naming any
other resource is refused at both ends."""

Key = tuple[str, ...]
_READ_ORDER = {"copy": 0, "get": 1, "members": 2, "list": 3}
"""The order :func:`unchanged` reads in, by key kind: what changes most often first (the
copies, whose status members move; the template), the lists and the clusters last."""


@functools.lru_cache(maxsize=1024)
def encode(resource: Resource) -> str:
    return "/".join((resource.group, resource.version, resource.plural, resource.kind,
                     "1" if resource.namespaced else "0"))


def version(obj: Mapping[str, Any] | None) -> str:
    """What identifies one state of an object: its uid and resourceVersion ("-": none)."""
    if obj is None:
        return "-"
    meta = obj.get("metadata") or {}
    return f"{meta.get('uid') or ''}@{meta.get('resourceVersion') or ''}"


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def list_value(items: Iterable[Mapping[str, Any]]) -> str:
    # Versions hold no newline (uids and resourceVersions are tokens): joined, no JSON.
    text = "\n".join(sorted(version(item) for item in items))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def members_value(members: Sequence[Member]) -> str:
    return digest(sorted((m.name, m.is_hub, m.reachable, m.joined) for m in members))


def cluster_view(doc: Mapping[str, Any], room: bool) -> list[Any]:
    """What the chain reads of one MemberCluster (see the module's docstring)."""
    meta = doc.get("metadata") or {}
    state = doc.get("status") or {}
    summary = state.get("resourceSummary")
    conditions = sorted((str(c.get("type")), str(c.get("status")))
                        for c in state.get("conditions") or [] if isinstance(c, dict))
    return [meta.get("name"), meta.get("uid"), meta.get("labels") or {}, doc.get("spec"),
            conditions, state.get("availableReplicas"), meta.get("deletionTimestamp"),
            summary if room else isinstance(summary, dict)]


def clusters_value(docs: Iterable[Mapping[str, Any]], room: bool) -> str:
    return digest(sorted((cluster_view(doc, room) for doc in docs), key=lambda v: str(v[0])))


@functools.cache
def code_digest() -> str:
    """Every source file of the package: another version of the code may decide otherwise."""
    root = Path(__file__).resolve().parents[2]
    found = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        found.update(str(path.relative_to(root)).encode())
        found.update(path.read_bytes())
    return found.hexdigest()[:32]


def static_value(settings: PropagationSettings, hub: str) -> str:
    return digest([FORMAT, code_digest(), repr(settings), hub])


class Unsafe(Exception):
    """A read the fingerprint cannot stand for: this round leaves none."""


class Recording:
    """A :class:`~.context.TransformContext` that notes every read of the one it wraps."""

    def __init__(self, inner: TransformContext, template: Resource, obj: ReadOnly,
                 hub: str) -> None:
        self._inner = inner
        self._template = template
        meta = obj.get("metadata") or {}
        self.reads: dict[Key, str] = {
            template_key(hub, template, meta.get("namespace"), str(meta.get("name"))):
                version(obj)}
        """Each read's key and the version it saw; the template's (read before) first."""
        self.lists: dict[Key, tuple[Callable[[Any], str], Any]] = {}
        """Lists and the members by key, with what digests them: only a round that writes
        its binding digests them (:func:`fingerprint`)."""
        self.cluster_docs: list[ReadOnly] | None = None
        self.unsafe: str | None = None

    @property
    def hub(self) -> str:
        return self._inner.hub

    @property
    def settings(self) -> PropagationSettings:
        return self._inner.settings

    @property
    def scheduler(self) -> scheduling.Scheduler:
        return self._inner.scheduler

    @property
    def failover(self) -> disruption.Failover:
        return self._inner.failover

    @property
    def deny_list(self) -> deny.DenyList:
        return self._inner.deny_list

    @property
    def interpreting(self) -> Interpreting:
        return self._inner.interpreting

    def now(self) -> float:
        return self._inner.now()

    def members(self) -> list[Member]:
        found = list(self._inner.members())
        self.lists[("members",)] = (members_value, found)
        return found

    def _allowed(self, resource: Resource) -> bool:
        if resource in BINDING_KINDS:
            self.unsafe = "read a binding (its own changes with every record)"
        elif resource not in READABLE and resource != self._template:
            self.unsafe = f"read {resource.kind}, not a fingerprinted kind"
        return self.unsafe is None

    async def get(self, resource: Resource, name: str, namespace: str | None,
                  cluster: str) -> ReadOnly | None:
        allowed = self._allowed(resource)
        try:
            found = await self._inner.get(resource, name, namespace, cluster)
        except BaseException:
            self.unsafe = "a read failed"
            raise
        if allowed:
            self.reads[("get", cluster, encode(resource), namespace or "", name)] = \
                version(found)
        return found

    async def list(self, resource: Resource, namespace: str | None = None) -> list[ReadOnly]:
        allowed = self._allowed(resource)
        try:
            found = await self._inner.list(resource, namespace)
        except BaseException:
            self.unsafe = "a read failed"
            raise
        if resource == api.MEMBER_CLUSTERS:
            self.cluster_docs = found  # digested at the end: the policy says what counts
        elif allowed:
            self.lists[("list", encode(resource), namespace or "")] = (list_value, found)
        return found

    async def copy(self, hub_resource: Resource, cluster: str, name: str,
                   namespace: str | None) -> ReadOnly | None:
        allowed = self._allowed(hub_resource)
        try:
            found = await self._inner.copy(hub_resource, cluster, name, namespace)
        except BaseException:
            self.unsafe = "a read failed"
            raise
        if allowed:
            self.reads[("copy", cluster, encode(hub_resource), namespace or "", name)] = \
                version(found)
        return found

    async def managed_fields(self, hub_resource: Resource, cluster: str, name: str,
                             namespace: str | None) -> Sequence[ReadOnly] | None:
        self.unsafe = "read managedFields from the member's API server"
        return await self._inner.managed_fields(hub_resource, cluster, name, namespace)


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What the annotation holds: the reads (keys), the room flag, the digest, and a short
    check of each read's value (:func:`check`, in the keys' order) so that a reconcile
    whose inputs changed stops comparing at the first that differs (a burst's status round
    finds its copies changed) instead of reading and digesting every one."""

    keys: tuple[Key, ...]
    room: bool
    value: str
    checks: tuple[str, ...] = ()

    def annotation(self) -> str:
        body = json.dumps({"k": [list(k) for k in self.keys], "r": self.room,
                           "d": self.value, "c": list(self.checks)},
                          separators=(",", ":")).encode()
        return f"{FORMAT}.{base64.b64encode(zlib.compress(body, 9)).decode()}"


def check(value: str) -> str:
    """A read's short check: 32 bits of its value's hash. It only says early that a value
    changed; equal checks prove nothing, the digest over every value decides."""
    return hashlib.sha256(value.encode()).hexdigest()[:8]


def written_versions(reports: Iterable[plan.Report]) -> dict[tuple[str, ...], str]:
    """The version each successful write left, by (cluster, group, kind, namespace, name):
    the server's answer (a delete leaves none). A write without an answer: :class:`Unsafe`."""
    found: dict[tuple[str, ...], str] = {}
    for report in reports:
        for outcome in report.outcomes.values():
            vertex = outcome.vertex
            if not outcome.attempted or vertex.action is plan.Action.NOOP:
                continue
            if not outcome.ok:
                raise Unsafe("a write failed")
            meta = vertex.obj.get("metadata") or {}
            group = deny.group_of(str(vertex.obj.get("apiVersion") or ""))
            ident = (vertex.cluster, group, str(vertex.obj.get("kind")),
                     str(meta.get("namespace") or ""), str(meta.get("name")))
            if ident in found:
                raise Unsafe("two writes of one object")
            if vertex.action is plan.Action.DELETE:
                found[ident] = "-"
            elif outcome.result is None:
                raise Unsafe("a write without the server's answer")
            else:
                found[ident] = version(outcome.result)
    return found


def template_key(hub: str, resource: Resource, namespace: str | None, name: str) -> Key:
    return ("get", hub, encode(resource), namespace or "", name)


def settled(build: Build, report: plan.Report) -> bool:
    """A round whose outcome a fingerprint may stand for: every write done, a decision that
    placed everything, every cluster judged ready (no toleration or grace period running:
    the clock is no input), no eviction task before or after, nothing held, suspended, only
    reported, in conflict or inherited, no dependency of a move on the disruption budget.
    (The reconciler adds: no
    requeue, nothing pending, no script timed out.)"""
    decision = build.decision
    failover = build.failover
    # Tasks the binding held when the round began count too: the render injected their
    # preserved labels before plan_eviction_tasks ended them, so the round's output still
    # depends on them and the next round (with none) renders differently.
    held_tasks = build.own_record is not None and bool(build.own_record.behaviour.eviction_tasks)
    return report.ok and decision is not None and decision.ok and not held_tasks and \
        not decision.unschedulable and not decision.pending and \
        not build.unreachable and not build.conflicts and not build.suspended and \
        not build.report_only and not build.inherited and not build.eviction_tasks and \
        not build.budget.moving and not failover.held and \
        all(j.state is failover_.State.READY for j in failover.judgements.values()) and \
        not rollouts.held_clusters(build)


def identity(key: Key) -> tuple[str, ...] | None:
    """The object a get or copy key reads, as :func:`written_versions` names it."""
    if key[0] not in ("get", "copy"):
        return None
    group, _, _, kind, _ = key[2].split("/")
    return key[1], group, kind, key[3], key[4]


def record_value(binding: Mapping[str, Any]) -> str:
    """The binding's record (as parsed: what the chain reads of it) and its labels."""
    labels = (binding.get("metadata") or {}).get("labels") or {}
    return digest([labels, bindings.cached(binding).to_obj()])


def fingerprint(recording: Recording, room: bool, static: str, template_key: Key,
                wanted: Mapping[str, Any], wanted_record: bindings.BindingRecord | None,
                reports: Iterable[plan.Report]) -> Fingerprint:
    """The fingerprint of the state this settled round leaves (raises :class:`Unsafe`);
    ``wanted_record`` is ``wanted`` parsed (None: it does not parse)."""
    if recording.unsafe is not None:
        raise Unsafe(recording.unsafe)
    if wanted_record is None:
        raise Unsafe("the binding to write does not parse")
    reads = dict(recording.reads)
    reads.update((key, value(found)) for key, (value, found) in recording.lists.items())
    if recording.cluster_docs is not None:
        reads[("clusters",)] = clusters_value(recording.cluster_docs, room)
    written = written_versions(reports)
    for key in reads:
        ident = identity(key)
        if ident is not None and ident in written:
            reads[key] = written[ident]
    keys = tuple(sorted(reads))
    if len(keys) > MAX_READS or template_key not in reads:
        raise Unsafe("too many reads")
    labels = (wanted.get("metadata") or {}).get("labels") or {}
    record = digest([labels, wanted_record.to_obj()])  # what record_value will read
    return Fingerprint(keys, room, digest([static, record, [[list(k), reads[k]]
                                                            for k in keys]]),
                       tuple(check(reads[k]) for k in keys))


def parse(binding: Mapping[str, Any], resource: Resource, namespace: str | None,
          hub: str) -> Fingerprint | None:
    """The binding's fingerprint, None when it has none or one we would not write (too
    long, another format, a key outside the template's namespace or readable kinds)."""
    raw = ((binding.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not isinstance(raw, str) or len(raw) > MAX_ANNOTATION or \
            not raw.startswith(f"{FORMAT}."):
        return None
    try:
        inflater = zlib.decompressobj()
        body = inflater.decompress(base64.b64decode(raw[len(FORMAT) + 1:], validate=True),
                                   MAX_ANNOTATION * 8)
        doc = json.loads(body) if not inflater.unconsumed_tail else None
    except (ValueError, zlib.error):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("r"), bool) or \
            not isinstance(doc.get("d"), str) or not isinstance(doc.get("k"), list) or \
            len(doc["k"]) > MAX_READS or not isinstance(doc.get("c"), list) or \
            len(doc["c"]) != len(doc["k"]) or not all(isinstance(c, str) for c in doc["c"]):
        return None
    keys = []
    for item in doc["k"]:
        if not isinstance(item, list) or not all(isinstance(p, str) for p in item) or \
                not valid_key(tuple(item), resource, namespace, hub):
            return None
        keys.append(tuple(item))
    return Fingerprint(tuple(keys), doc["r"], doc["d"], tuple(doc["c"]))


def required(record: bindings.BindingRecord, hub: str, resource: Resource,
             namespace: str | None, name: str) -> set[Key]:
    """Reads every settled round makes: the template, the members, the policies and
    overrides of its scope, the customizations, its copies where it is placed. A
    fingerprint without them is not ours (a tenant allowed to write bindings cannot make
    one that leaves out what an administrator controls: it would need the cluster-scoped
    policies' and the member copies' uids)."""
    ns = namespace or ""
    keys: set[Key] = {("get", hub, encode(resource), ns, name), ("members",), ("clusters",),
                      ("list", encode(api.INTERPRETER_CUSTOMIZATIONS), "")}
    for kind in api.POLICY_RESOURCES:
        if namespace is not None or not kind.namespaced:
            keys.add(("list", encode(kind), ns if kind.namespaced else ""))
    keys |= {("copy", cluster, encode(resource), ns, name) for cluster in record.decision()}
    return keys


_READABLE = {encode(r): r for r in READABLE}


def resource_named(name: str, template: Resource) -> Resource | None:
    """The resource a key names: the template's own or one the chain reads."""
    found = _READABLE.get(name)
    if found is None and name == encode(template):
        return template
    return found


MEMBER_GETS = (encode(NAMESPACES), encode(api.CRDS))
"""What the chain gets from a member's cache besides copies (dependencies first)."""
COPY_KINDS = tuple(encode(r) for r in dependencies.KINDS.values())
"""Copies of other kinds than the template's: the dependencies it carries."""


def valid_key(key: Key, template: Resource, namespace: str | None, hub: str) -> bool:
    """A read the chain makes: of the template's namespace or cluster scope, lists and
    gets of the hub's kinds on the hub, a member's namespace or CRD, a copy (of the
    template's kind or a dependency's) on a member. Nothing else is read on a key's word:
    a read of another kind on a member would start a watch there."""
    shapes = {"members": 1, "clusters": 1, "get": 5, "list": 3, "copy": 5}
    if shapes.get(key[0] if key else "") != len(key):
        return False
    if key[0] in ("members", "clusters"):
        return True
    res, ns = (key[1], key[2]) if key[0] == "list" else (key[2], key[3])
    if resource_named(res, template) is None or ns not in ("", namespace or ""):
        return False
    if key[0] == "copy":
        return key[1] != hub and (res == encode(template) or res in COPY_KINDS)
    return key[0] == "list" or key[1] == hub or res in MEMBER_GETS


async def current(ctx: TransformContext, key: Key, room: bool, template: Resource) -> str:
    """The value ``key`` reads now (as :class:`Recording` noted it)."""
    if key[0] == "members":
        return members_value(ctx.members())
    if key[0] == "clusters":
        return clusters_value(await ctx.list(api.MEMBER_CLUSTERS), room)
    resource = resource_named(key[1] if key[0] == "list" else key[2], template)
    assert resource is not None  # valid_key checked it
    if key[0] == "list":
        return list_value(await ctx.list(resource, key[2] or None))
    cluster, namespace, name = key[1], key[3], key[4]
    if key[0] == "get":
        return version(await ctx.get(resource, name, namespace or None, cluster))
    return version(await ctx.copy(resource, cluster, name, namespace or None))


async def unchanged(ctx: TransformContext, binding: Mapping[str, Any] | None,
                    resource: Resource, namespace: str | None, name: str,
                    static: str) -> bool:
    """Whether every read the binding's fingerprint lists reads what the last settled round
    left (then a full reconcile would write nothing). Any doubt is False."""
    found = parse(binding, resource, namespace, ctx.hub) if binding is not None else None
    if found is None or binding is None:
        return False
    try:
        record = record_value(binding)
        if not required(bindings.cached(binding), ctx.hub, resource, namespace, name) <= \
                set(found.keys):
            return False
        now: dict[Key, str] = {}
        for index in sorted(range(len(found.keys)),
                            key=lambda i: _READ_ORDER.get(found.keys[i][0], 4)):
            key = found.keys[index]
            now[key] = await current(ctx, key, found.room, resource)
            if check(now[key]) != found.checks[index]:
                return False  # changed: no need to read the rest
    except (bindings.BindingError, ClientError, NotGranted):
        return False
    values = [[list(key), now[key]] for key in found.keys]
    return digest([static, record, values]) == found.value

