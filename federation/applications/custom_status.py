"""KubeVela's definition status: ``spec.status.healthPolicy`` and ``customStatus``, pure.

A ComponentDefinition or TraitDefinition may say how to judge what it rendered once it
runs: ``healthPolicy`` is CUE that sets ``isHealth`` (a bool), ``customStatus`` CUE that
sets ``message`` (a string), each over ``context`` (the component's names, ``output``: the
live workload as read from the member, ``outputs.<name>``: the live auxiliary objects by
output name, and ``status.healthy`` for ``customStatus``) and ``parameter`` (the
properties). KubeVela evaluates them after each apply (pkg/cue/definition/health); so do
we, per deploy step and cluster, in the CUE workers like a render (a request, an answer).

Rendering records a :class:`Check` per definition that has a status, against the
component's workload (:func:`checks_of`); the controller reads the live objects and asks
:func:`health_request` / :func:`message_request`, then :func:`verdict` folds the answers
into the component's health and message, and each trait's, as KubeVela reports them in
``status.services[]``. A component of its own definition with a ``healthPolicy`` is
judged by it alone (KubeVela's: no policy is healthy); without one, by the built-in
judgement of its kind. A policy that fails, does not set ``isHealth``, or runs over its
budget makes the component unhealthy with the reason as its message (KubeVela: unhealthy,
the error only in its log).

KubeVela finds a definition's auxiliary objects by two labels, which the renderer puts on
them: ``trait.oam.dev/type`` (``AuxiliaryWorkload`` for a component's ``outputs``, the
trait's type for a trait's) and ``trait.oam.dev/resource`` (the output's name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from federation.untrusted.text import one_line

JSON = dict[str, Any]

TRAIT_TYPE_LABEL = "trait.oam.dev/type"
TRAIT_RESOURCE_LABEL = "trait.oam.dev/resource"
AUXILIARY = "AuxiliaryWorkload"
"""``trait.oam.dev/type`` of a component's own ``outputs``."""
HEALTH_FIELD = "isHealth"
MESSAGE_FIELD = "message"
NO_LIVE_OBJECTS = "health unknown offline: healthPolicy/customStatus read the live objects"
"""What ``fedctl app dry-run`` says of a definition with a status: it reads no member."""


@dataclasses.dataclass(frozen=True)
class Check:
    """One definition's status, for one component's render."""

    field: Literal["component", "trait"]
    type: str
    ref: str
    """The definition (``ComponentDefinition vela-system/helm``): named in every message."""
    health: str
    """``healthPolicy`` (CUE text; empty: none)."""
    custom: str
    """``customStatus`` (CUE text; empty: none)."""
    parameter: Mapping[str, Any]
    context: Mapping[str, Any]
    """KubeVela's base context (names only); the live objects are added per cluster."""


@dataclasses.dataclass(frozen=True)
class Checks:
    """The checks of one component, judged on its workload (its first object)."""

    component: str
    workload: tuple[str, str, str, str]
    """apiVersion, kind, namespace, name of the workload the checks are attached to."""
    checks: tuple[Check, ...]

    @property
    def own(self) -> Check | None:
        """The component's own definition's check, if it has one."""
        return next((c for c in self.checks if c.field == "component"), None)


def identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""),
            str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def label_output(obj: JSON, owner: str, name: str) -> JSON:
    """An auxiliary object with KubeVela's labels: which definition's ``outputs`` (its
    trait type, or ``AuxiliaryWorkload``) and under which name."""
    meta = dict(obj.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels[TRAIT_TYPE_LABEL] = owner
    labels[TRAIT_RESOURCE_LABEL] = name
    meta["labels"] = labels
    return {**obj, "metadata": meta}


def outputs_of(objects: Sequence[Mapping[str, Any]], component: str, owner: str
               ) -> dict[str, Mapping[str, Any]]:
    """The objects of ``component`` that ``owner``'s ``outputs`` rendered, by output name
    (KubeVela's lookup by the two labels, among this component's objects)."""
    found: dict[str, Mapping[str, Any]] = {}
    for obj in objects:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get("app.oam.dev/component") == component and \
                labels.get(TRAIT_TYPE_LABEL) == owner and labels.get(TRAIT_RESOURCE_LABEL):
            found[str(labels[TRAIT_RESOURCE_LABEL])] = obj
    return found


def owner_of(check: Check) -> str:
    return AUXILIARY if check.field == "component" else check.type


def context_for(check: Check, cluster: str, output: Mapping[str, Any] | None,
                outputs: Mapping[str, Mapping[str, Any]]) -> JSON:
    """KubeVela's template context for a status: a component's sees its workload as
    ``output``; a trait's sees only its own ``outputs``."""
    context: JSON = {**check.context, "cluster": cluster}
    if check.field == "component" and output is not None:
        context["output"] = dict(output)
    if outputs:
        context["outputs"] = {k: dict(v) for k, v in outputs.items()}
    return context


def health_request(check: Check, context: Mapping[str, Any]) -> JSON:
    return _request(check, check.health, "healthPolicy", context, HEALTH_FIELD)


def message_request(check: Check, context: Mapping[str, Any], healthy: bool) -> JSON:
    """``customStatus`` sees ``context.status.healthy`` (KubeVela sets it first)."""
    return _request(check, check.custom, "customStatus",
                    {**context, "status": {"healthy": healthy, "details": {}}}, MESSAGE_FIELD)


def _request(check: Check, text: str, what: str, context: Mapping[str, Any], field: str
             ) -> JSON:
    """A CUE worker request (:mod:`.cue_worker`'s shape, as a render's)."""
    return {"template": text, "name": f"{check.ref} status.{what}",
            "parameter": dict(check.parameter), "context": dict(context),
            "fields": [field]}


def health_of(answer: Mapping[str, Any], check: Check) -> tuple[bool, str]:
    """``isHealth`` from an answer, or unhealthy with the reason (one line)."""
    value = _value(answer, check, "healthPolicy", HEALTH_FIELD)
    if isinstance(value, _Failure):
        return False, f"{check.ref}: healthPolicy: {value}"
    if not isinstance(value, bool):
        return False, f"{check.ref}: healthPolicy: isHealth is not a concrete bool"
    return value, ""


def message_of(answer: Mapping[str, Any], check: Check) -> str:
    """``message`` from an answer, or the reason it has none (one line)."""
    value = _value(answer, check, "customStatus", MESSAGE_FIELD)
    if isinstance(value, _Failure):
        return f"{check.ref}: customStatus: {value}"
    if not isinstance(value, str):
        return f"{check.ref}: customStatus: message is not a concrete string"
    return one_line(value, 500)


class _Failure(str):
    """An answer's error line (told apart from a ``message`` the template set)."""


def _value(answer: Mapping[str, Any], check: Check, what: str, field: str) -> Any:
    if "error" in answer:  # the evaluator's line names the template: said once
        text = str(answer["error"]).removeprefix(f"{check.ref} status.{what}: ")
        return _Failure(one_line(text, 300))
    values = answer.get("values")
    if not isinstance(values, dict) or field not in values:
        return _Failure(f"{field} is not defined")
    return values[field]


@dataclasses.dataclass(frozen=True)
class Status:
    """A component's status in one cluster, as KubeVela's ``services[]`` entry has it."""

    component: str
    healthy: bool
    message: str
    traits: tuple[tuple[str, bool, str], ...] = ()
    """(type, healthy, message) of each trait whose definition has a status."""
    judged: bool = False
    """The component's own definition has a ``healthPolicy``: it alone says whether the
    workload is healthy (else its kind's built-in judgement does)."""


def fold(checks: Checks, results: Sequence[tuple[Check, bool, str]]) -> Status:
    """The component's status from each check's (healthy, message): unhealthy if any is,
    the component's own message first, else the first trait's (KubeVela's order)."""
    own = next(((h, m) for c, h, m in results if c.field == "component"), (True, ""))
    traits = tuple((c.type, h, m) for c, h, m in results if c.field == "trait")
    healthy = own[0] and all(t[1] for t in traits)
    message = own[1] or next((t[2] for t in traits if t[2]), "")
    judged = checks.own is not None and bool(checks.own.health)
    return Status(checks.component, healthy, message, traits, judged)
