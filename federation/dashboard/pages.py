"""The dashboard's pages as HTML, from hub objects: pure, no I/O.

Each page is two parts: :func:`layout` (the document, navigation, the CSRF token in a
``<meta>``) around a ``<main>`` whose ``#live`` section is what the live stream sends
again when the hub changes. Everything from the hub goes through :mod:`.html`, so a name
or message is text, never markup.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.dashboard.html import Html, el, join
from federation.hub import bindings as bindings_
from federation.hub import capacity

JSON = dict[str, Any]
NAV = (("/", "Fleet"), ("/workloads", "Workloads"), ("/applications", "Applications"),
       ("/rollouts", "Config rollouts"), ("/events", "Events"))


def layout(title: str, path: str, body: Html, csrf: str, identity: str,
           live_page: str | None = None) -> Html:
    """The whole document: no inline script or style (the CSP allows neither).

    ``live_page``: the page whose live part the stream sends, when it is not the URL shown
    (the script's default): a refused action is answered at its POST URL, and its stream
    must follow the Application's page."""
    links = [el("li", el("a", label, href=href,
                         aria_current="page" if _section(path) == href else None))
             for href, label in NAV]
    head = el("head", el("meta", charset="utf-8"),
              el("meta", name="viewport", content="width=device-width, initial-scale=1"),
              el("meta", name="csrf-token", content=csrf),
              el("meta", name="live-page", content=live_page) if live_page else "",
              el("title", f"{title} · fedctl dashboard"),
              el("link", rel="stylesheet", href="/static/dashboard.css"),
              el("script", src="/static/dashboard.js", defer=True))
    header = el("header", el("a", "Skip to content", href="#content", class_="skip"),
                el("span", "fedctl dashboard", class_="brand"),
                el("nav", el("ul", links), aria_label="Sections"),
                el("span", f"as {identity}", class_="identity"))
    main = el("main", el("h1", title), body, id="content", tabindex="-1")
    status = el("p", "", id="live-status", role="status", aria_live="polite",
                class_="live-status")
    return Html("<!doctype html>" + el("html", head, el("body", header, main, status),
                                       lang="en"))


def _section(path: str) -> str:
    first = "/" + path.strip("/").split("/")[0] if path.strip("/") else "/"
    return {"/workload": "/workloads", "/application": "/applications"}.get(first, first)


def live(fragment: Html) -> Html:
    """The part of a page the stream replaces."""
    return el("section", fragment, id="live", aria_label="Live content")


def notes(found: Mapping[str, str], *sources: str) -> Html:
    """Why a list is partial or empty: forbidden, narrowed to a namespace, unreachable."""
    return join(el("p", f"{source}: {found[source]}", class_="note")
                for source in sources if source in found)


def _condition(doc: Mapping[str, Any], kind: str) -> str:
    for condition in (doc.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return str(condition.get("status"))
    return "Unknown"


def badge(value: str) -> Html:
    good = value in ("True", "Ready", "Healthy", "healthy", "succeeded", "Complete", "Done",
                     "running")
    bad = value in ("False", "failed", "Failed", "Refused", "NotReady", "unhealthy", "Warning",
                    "workflowFailed")
    return el("span", value, class_="badge " + ("good" if good else "bad" if bad else "other"))


def meter(label: str, used: float, total: float, shown: str) -> Html:
    """A bar with its numbers as text beside it (the bar alone is not the information)."""
    return el("span", el("meter", shown, value=f"{max(used, 0):g}", min="0",
                         max=f"{max(total, used, 1):g}", aria_label=f"{label}: {shown}"),
              el("span", shown, class_="num"), class_="bar")


# -- fleet -----------------------------------------------------------------------------


def _usage(summary: Mapping[str, Any] | None, resource: str) -> Html:
    if not summary:
        return Html("-")
    have = capacity.quantity((summary.get("allocatable") or {}).get(resource, 0))
    left = capacity.free(summary).get(resource, 0.0)
    used = max(have - left, 0.0)
    scale, unit = (2.0**30, "Gi") if resource == "memory" else (1.0, "")
    return meter(resource, used, have, f"{used / scale:.1f}{unit} of {have / scale:.1f}{unit}"
                 if resource != "pods" else f"{used:.0f} of {have:.0f}")


def fleet(members: Sequence[JSON], bindings: Iterable[JSON], found: Mapping[str, str]) -> Html:
    placed = _placed(bindings)
    ready = sum(1 for m in members if _condition(m, "Ready") == "True")
    rows = [_member_row(m, placed) for m in sorted(members, key=_name)]
    table = el("table", el("caption", f"{len(members)} members, {ready} ready"),
               el("thead", el("tr", [el("th", h, scope="col") for h in (
                   "Member", "Ready", "Reachable", "Mode", "Taints", "Region / zone / provider",
                   "CPU used", "Memory used", "Pods used", "Workloads")])),
               el("tbody", rows), class_="fleet")
    return join([notes(found, "members", "bindings"), table])


def _member_row(doc: JSON, placed: Mapping[str, tuple[int, int]]) -> Html:
    spec = doc.get("spec") or {}
    name = _name(doc)
    summary = (doc.get("status") or {}).get("resourceSummary")
    taints = [el("li", f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}")
              for t in spec.get("taints") or [] if isinstance(t, Mapping)]
    where = " / ".join(str(spec.get(k) or "-") for k in ("region", "zone", "provider"))
    count, replicas = placed.get(name, (0, 0))
    ready = _condition(doc, "Ready")
    return el("tr", el("th", name, scope="row"),
              el("td", badge(ready), data_member_ready=name),
              el("td", badge(_condition(doc, "Reachable"))),
              el("td", "pull" if str(spec.get("mode", "")).lower() == "pull" else "push"),
              el("td", el("ul", taints, class_="plain") if taints else "-"),
              el("td", where),
              el("td", _usage(summary, "cpu")), el("td", _usage(summary, "memory")),
              el("td", _usage(summary, "pods")),
              el("td", f"{count} ({replicas} replicas)"),
              class_="" if ready == "True" else "unready", data_member=name)


def _placed(bindings: Iterable[JSON]) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for _, record in bindings_.readable(bindings):
        for name, replicas in (record.placements() if record else {}).items():
            count, total = found.get(name, (0, 0))
            found[name] = (count + 1, total + replicas)
    return found


def _name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name") or "")


def _namespace(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("namespace") or "")


def href(*parts: str, **query: str | None) -> str:
    """A dashboard URL with each part quoted (a name with ``/`` or ``?`` stays one part)."""
    path = "/" + "/".join(urllib.parse.quote(p or "_", safe="") for p in parts)
    kept = {k: v for k, v in query.items() if v}
    return path + ("?" + urllib.parse.urlencode(kept) if kept else "")


# -- workloads -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """A template's binding read for the page."""

    binding: JSON
    record: bindings_.BindingRecord | None
    error: str | None

    @property
    def namespace(self) -> str:
        return _namespace(self.binding)

    @property
    def name(self) -> str:
        return _name(self.binding)

    def wanted(self) -> dict[str, int]:
        return self.record.placements() if self.record else {}

    def ready(self) -> dict[str, int | None]:
        found: dict[str, int | None] = {}
        for copy in self.record.aggregated if self.record else ():
            status = copy.status or {}
            value = status.get("readyReplicas", status.get("availableReplicas"))
            found[copy.cluster] = value if isinstance(value, int) else None
        return found


def workloads_of(bindings: Iterable[JSON]) -> list[Workload]:
    found = []
    for binding in bindings:
        try:
            found.append(Workload(binding, bindings_.read(binding), None))
        except bindings_.BindingError as exc:
            found.append(Workload(binding, None, str(exc)))
    return sorted(found, key=lambda w: (w.namespace, w.name))


def workloads(items: Sequence[Workload], found: Mapping[str, str]) -> Html:
    rows = []
    for w in items:
        ref = w.record.resource if w.record else None
        wanted, ready = w.wanted(), w.ready()
        rows.append(el("tr", el("td", w.namespace or "(cluster)"),
                       el("td", ref.kind if ref else "-"),
                       el("th", el("a", ref.name if ref else w.name,
                                   href=href("workload", w.namespace, w.name)), scope="row"),
                       el("td", (w.record.policy if w.record else None) or "-"),
                       el("td", f"{sum(v or 0 for v in ready.values())}/{sum(wanted.values())}"),
                       el("td", ", ".join(f"{c}: {n}" for c, n in sorted(wanted.items()))
                          or (w.error or "not placed"))))
    table = el("table", el("caption", f"{len(items)} workloads"),
               el("thead", el("tr", [el("th", h, scope="col") for h in (
                   "Namespace", "Kind", "Name", "Policy", "Ready/wanted", "Clusters")])),
               el("tbody", rows))
    return join([notes(found, "bindings", "clusterbindings"), table])


def workload(item: Workload, events: Sequence[JSON]) -> Html:
    """One template: policy, per-cluster bars, explanation, conditions, clean-up, events."""
    if item.record is None:
        return el("p", f"binding {item.name}: {item.error}", class_="note")
    record = item.record
    wanted, ready = item.wanted(), item.ready()
    clusters = sorted(set(wanted) | {c for c in ready if c in wanted})
    bars = [el("tr", el("th", cluster, scope="row"),
               el("td", meter(f"{cluster} ready of wanted", ready.get(cluster) or 0,
                              wanted.get(cluster, 0),
                              f"{_count(ready.get(cluster))} ready of {wanted.get(cluster, 0)}"
                              ), data_cluster=cluster))
            for cluster in clusters]
    decided = record.decided
    parts = [
        el("dl", el("dt", "Template"), el("dd", record.resource.describe()),
           el("dt", "Policy"), el("dd", record.policy or "-"),
           el("dt", "Summary"), el("dd", decided.summary if decided else "-"),
           el("dt", "Pending clean-up"),
           el("dd", ", ".join(record.pending()) or "none", id="pending-cleanup")),
        el("h2", "Replicas per cluster"),
        el("table", el("thead", el("tr", el("th", "Cluster", scope="col"),
                                   el("th", "Ready of wanted", scope="col"))),
           el("tbody", bars) if bars else el("tbody", el("tr", el("td", "placed nowhere",
                                                                  colspan="2"))),
           class_="bars", id="replica-bars"),
        el("h2", "Why here"),
        el("ol", [el("li", line) for line in (decided.explanation if decided else ())]
           or el("li", "no explanation recorded"), class_="explanation"),
        el("h2", "Conditions"), conditions(record.conditions),
        el("h2", "Events"), event_table(events, caption=f"{len(events)} events"),
    ]
    return join(parts)


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def conditions(items: Iterable[Mapping[str, Any]]) -> Html:
    rows = [el("tr", el("td", str(c.get("type"))), el("td", badge(str(c.get("status")))),
               el("td", str(c.get("reason") or "")), el("td", str(c.get("message") or "")),
               el("td", str(c.get("lastTransitionTime") or "")))
            for c in items]
    if not rows:
        return el("p", "none")
    return el("table", el("thead", el("tr", [el("th", h, scope="col") for h in (
        "Type", "Status", "Reason", "Message", "Since")])), el("tbody", rows))


def what_if(members: Sequence[str], failed: str | None, result: Html | None) -> Html:
    """The what-if form (a GET: it changes nothing) and, once asked, its answer."""
    options = [el("option", "choose a member", value="")] + [
        el("option", name, value=name, selected=name == failed) for name in members]
    form = el("form", el("label", "Mark this member failed", for_="fail"),
              el("select", options, id="fail", name="fail"),
              el("button", "Show where replicas would go", type="submit"),
              method="get", class_="inline")
    return el("section", el("h2", "What if a member failed?"), form, result or "",
              id="whatif", aria_label="What if")


def what_if_answer(failed: str, decision: Mapping[str, int], now: Mapping[str, int],
                   explanation: Sequence[str]) -> Html:
    names = sorted(set(decision) | set(now))
    rows = [el("tr", el("th", n, scope="row"), el("td", str(now.get(n, 0))),
               el("td", str(decision.get(n, 0)))) for n in names]
    return join([
        el("table", el("caption", f"If {failed} failed and stayed down"),
           el("thead", el("tr", el("th", "Cluster", scope="col"), el("th", "Now", scope="col"),
                          el("th", "Would have", scope="col"))),
           el("tbody", rows), id="whatif-result"),
        el("ol", [el("li", line) for line in explanation], class_="explanation")])


# -- events ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EventFilter:
    text: str = ""
    type: str = ""
    namespace: str = ""

    def keeps(self, event: Mapping[str, Any]) -> bool:
        obj = event.get("involvedObject") or {}
        if self.type and str(event.get("type")) != self.type:
            return False
        if self.namespace and _namespace(event) != self.namespace:
            return False
        haystack = " ".join(str(v) for v in (event.get("reason"), event.get("message"),
                                              obj.get("kind"), obj.get("name")))
        return not self.text or self.text.lower() in haystack.lower()


def event_rows(events: Iterable[Mapping[str, Any]]) -> list[Html]:
    rows = []
    for event in events:
        obj = event.get("involvedObject") or {}
        rows.append(el("tr", el("td", str(event.get("lastTimestamp") or event.get("eventTime")
                                          or "")),
                       el("td", badge(str(event.get("type") or ""))),
                       el("td", _namespace(event)),
                       el("td", f"{obj.get('kind', '')} {obj.get('name', '')}"),
                       el("td", str(event.get("reason") or "")),
                       el("td", str(event.get("message") or ""))))
    return rows


def event_table(events: Sequence[Mapping[str, Any]], caption: str) -> Html:
    return el("table", el("caption", caption),
              el("thead", el("tr", [el("th", h, scope="col") for h in (
                  "When", "Type", "Namespace", "Object", "Reason", "Message")])),
              el("tbody", event_rows(events)), class_="events")


def event_form(chosen: EventFilter) -> Html:
    types = [el("option", label or "any", value=label, selected=chosen.type == label)
             for label in ("", "Normal", "Warning")]
    return el("form", el("label", "Text", for_="q"),
              el("input", id="q", name="q", type="search", value=chosen.text),
              el("label", "Type", for_="type"), el("select", types, id="type", name="type"),
              el("label", "Namespace", for_="ns"),
              el("input", id="ns", name="namespace", value=chosen.namespace),
              el("button", "Filter", type="submit"), method="get", class_="inline")


def events(items: Sequence[JSON], chosen: EventFilter, found: Mapping[str, str],
           limit: int = 200) -> Html:
    kept = [e for e in items if chosen.keeps(e)][:limit]
    return join([notes(found, "events"),
                 event_table(kept, f"{len(kept)} most recent of {len(items)} events")])


# -- configuration rollouts -------------------------------------------------------------


def rollouts(policies: Sequence[JSON], found: Mapping[str, str]) -> Html:
    sections = [notes(found, "rollouts")]
    if not policies:
        sections.append(el("p", "No ReconfigurePolicy."))
    for policy in policies:
        status = policy.get("status") or {}
        clusters = [c for c in status.get("clusters") or [] if isinstance(c, Mapping)]
        in_progress = [str(c.get("name")) for c in clusters if c.get("state") == "Updating"]
        rows = [el("tr", el("th", str(c.get("name")), scope="row"),
                   el("td", badge(str(c.get("state") or "Pending"))),
                   el("td", str(c.get("releasedVersion") or "-")),
                   el("td", str(c.get("action") or "")),
                   el("td", str(c.get("startedAt") or "")),
                   el("td", str(c.get("finishedAt") or "")),
                   el("td", str(c.get("message") or ""))) for c in clusters]
        sections.append(el(
            "article",
            el("h2", f"{_namespace(policy)}/{_name(policy)}"),
            el("p", f"version {status.get('configVersion') or '-'} · "
                    f"phase {status.get('phase') or '-'} · action {status.get('action') or '-'}"
                    f" · in progress: {', '.join(in_progress) or 'none'}"),
            el("table", el("thead", el("tr", [el("th", h, scope="col") for h in (
                "Cluster", "State", "Released version", "Action", "Started", "Finished",
                "Message")])), el("tbody", rows)),
            class_="rollout"))
    return join(sections)
