"""Applications' pages: the list, and one Application's workflow as a timeline with the
actions the user may take (pure: the permission is asked by the server and passed in)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.dashboard.html import Html, el, join
from federation.dashboard.pages import badge, conditions, href, notes

JSON = dict[str, Any]
ACTIONS = ("resume", "approve", "rollback")


@dataclasses.dataclass(frozen=True)
class Permission:
    """Whether the user may patch this Application, and if not, the hub's reason."""

    allowed: bool
    reason: str = ""


def applications(items: Sequence[JSON], found: Mapping[str, str]) -> Html:
    rows = []
    for item in items:
        meta = item.get("metadata") or {}
        status = item.get("status") or {}
        flow = status.get("workflow") or {}
        rows.append(el("tr", el("td", str(meta.get("namespace") or "")),
                       el("th", el("a", str(meta.get("name") or ""),
                                   href=href("application", str(meta.get("namespace") or ""),
                                             str(meta.get("name") or ""))), scope="row"),
                       el("td", badge(str(status.get("status") or "unknown"))),
                       el("td", str((status.get("latestRevision") or {}).get("name") or "-")),
                       el("td", str(flow.get("phase") or "-"))))
    table = el("table", el("caption", f"{len(items)} Applications"),
               el("thead", el("tr", [el("th", h, scope="col") for h in (
                   "Namespace", "Name", "Phase", "Revision", "Workflow")])),
               el("tbody", rows))
    return join([notes(found, "applications"), table])


def suspended_step(status: Mapping[str, Any]) -> JSON | None:
    for step in (status.get("workflow") or {}).get("steps") or []:
        if isinstance(step, dict) and step.get("phase") == "suspended":
            return step
    return None


def available(action: str, status: Mapping[str, Any]) -> str | None:
    """None when ``action`` makes sense now, else why not (shown beside the button)."""
    waiting = suspended_step(status)
    if action == "resume":
        return None if waiting and waiting.get("type") != "approve" else \
            "no suspended step to resume"
    if action == "approve":
        return None if waiting and waiting.get("type") == "approve" else \
            "no step waiting for approval"
    return None


def _step(step: Mapping[str, Any], health: Mapping[tuple[str, str], Mapping[str, Any]],
          revision: str) -> Html:
    name = str(step.get("name") or "")
    clusters = [el("li", cluster, " ", badge(
        "healthy" if (health.get((name, cluster)) or {}).get("healthy") else "waiting"))
        for cluster in (str(c) for c in step.get("clusters") or [])]
    subs = [_step(sub, health, revision) for sub in step.get("subStepsStatus") or []
            if isinstance(sub, Mapping)]
    phase = str(step.get("phase") or "pending")
    return el("li", el("span", name, class_="step-name"), " ",
              el("span", f"({step.get('type')})", class_="step-type"), " ", badge(phase),
              el("p", " ".join(str(step.get(k)) for k in ("reason", "message") if step.get(k))
                 or "", class_="step-message"),
              el("p", f"revision {revision} · first {step.get('firstExecuteTime') or '-'} · "
                      f"finished {step.get('finishedTime') or '-'}", class_="step-times"),
              el("ul", clusters, class_="plain clusters") if clusters else "",
              el("ol", subs, class_="timeline") if subs else "",
              class_=f"step {phase}", data_step=name, data_phase=phase)


def application(item: JSON, permission: Permission, csrf: str, message: str = "") -> Html:
    meta = item.get("metadata") or {}
    status = item.get("status") or {}
    flow = status.get("workflow") or {}
    revision = str((status.get("latestRevision") or {}).get("name") or "-")
    health = {(str(s.get("step")), str(s.get("cluster"))): s
              for s in status.get("services") or [] if isinstance(s, Mapping)}
    steps = [_step(s, health, revision) for s in flow.get("steps") or []
             if isinstance(s, Mapping)]
    parts = [
        el("dl", el("dt", "Phase"), el("dd", badge(str(status.get("status") or "unknown"))),
           el("dt", "Revision"), el("dd", revision),
           el("dt", "Workflow"), el("dd", f"{flow.get('phase') or '-'} · started "
                                          f"{flow.get('startTime') or '-'} · ended "
                                          f"{flow.get('endTime') or '-'}"),
           el("dt", "Rolled back to"),
           el("dd", str((status.get("rollback") or {}).get("revision") or "-"))),
        actions(str(meta.get("namespace") or ""), str(meta.get("name") or ""), status,
                permission, csrf, message),
        el("h2", "Workflow"),
        el("ol", steps or el("li", "no step has run yet"), class_="timeline", id="timeline"),
        el("h2", "Conditions"),
        conditions(c for c in status.get("conditions") or [] if isinstance(c, Mapping)),
    ]
    return join(parts)


def actions(namespace: str, name: str, status: Mapping[str, Any], permission: Permission,
            csrf: str, message: str) -> Html:
    """One form per action (POST with the CSRF token); a disabled button says why."""
    forms = []
    for action in ACTIONS:
        why = permission.reason if not permission.allowed else available(action, status)
        reason_id = f"why-{action}"
        forms.append(el(
            "form",
            el("input", type="hidden", name="csrf", value=csrf),
            el("button", action.capitalize(), type="submit", disabled=why is not None,
               aria_describedby=reason_id if why else None, data_action=action),
            el("span", why or "", id=reason_id, class_="why"),
            method="post", action=href("application", namespace, name, action),
            class_="action"))
    said = el("p", message, role="alert", class_="outcome", id="outcome") if message else ""
    return el("section", el("h2", "Actions"), said, forms, aria_label="Actions")
