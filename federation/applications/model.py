"""The Application API as KubeVela spells it, validated: every field is honoured or refused.

``core.oam.dev/v1beta1`` Application: ``spec.components[]`` (``name``, ``type``,
``properties``, ``traits[]`` of ``type`` and ``properties``), ``spec.policies[]``
(``name``, ``type``, ``properties``) and ``spec.workflow.steps[]`` (``name``, ``type``,
``properties``, ``timeout``, ``if``, ``dependsOn``, ``inputs``, ``outputs``, ``subSteps``;
their shape is :mod:`.flow`'s). ``spec.workflow.ref`` is resolved before this model sees
the spec (:mod:`.workflow_ref` puts the named Workflow's steps in its place); left in, it
is refused here. KubeVela fields we do not implement (``scopes``...) are refused by name
rather than ignored: an Application that relies on them would otherwise deliver something
else than its author meant. Errors are :class:`AppError`
with a field path (``spec.components[0].traits[1].type``). A notification step's
properties are checked down to their leaves (:func:`notification`), its URLs included: a
URL the controller could not POST to is refused here, by path and without quoting it (it
may hold a token), rather than failing every reconcile later.

Limits, each refused by path with the number (an Application is tenant input: the
controller compiles it on every reconcile, so its size is the tenant's to choose unless
bounded here): at most :data:`MAX_COMPONENTS` components, :data:`MAX_POLICIES` policies,
:data:`MAX_STEPS` workflow steps; a notification step has at most two URLs by its shape
(``webhook.url`` and ``slack.url``: :data:`MAX_URLS_PER_STEP`), each at most
:data:`MAX_URL_LENGTH` characters and without a user name or password, and a message of at
most :data:`MAX_MESSAGE` characters; a revision renders at most :data:`MAX_RENDERED`
objects over its deploy steps (:class:`RenderBudget`).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr

from federation.applications import vela_core
from federation.untrusted.text import one_line

JSON = dict[str, Any]

API_VERSION = "core.oam.dev/v1beta1"
COMPONENT_TYPES = ("webservice", "worker", "config", "k8s-objects", "statefulset", "daemon",
                   "task", "cron-task", "raw", "ref-objects", "helmchart")
TRAIT_TYPES = ("scaler", "labels", "annotations", "env", "expose", "storage", "sidecar",
               "gateway", "ingress", "ingress-1-20", "init-container", "cpuscaler", "command",
               "container-image", "hostalias", "json-merge-patch", "json-patch", "affinity",
               "container-ports", "hpa", "k8s-update-strategy", "lifecycle",
               "podsecuritycontext", "securitycontext", "resource", "service-account",
               "startup-probe", "topologyspreadconstraints", "service-binding",
               "pure-ingress", "volumes", "pvc", "configmap", "nocalhost")
POLICY_TYPES = ("topology", "override", "health", "garbage-collect", "apply-once",
                "read-only", "env-binding", "replication", "resource-update",
                "shared-resource", "take-over")
STEP_TYPES = ("deploy", "apply-component", "suspend", "approve", "notification",
              "step-group", "apply-object", "apply-deployment", "apply-application",
              "apply-remaining", "deploy2runtime", "restart-workflow", "read-object",
              "export2config", "export2secret", "deploy2env", "print-message-in-status",
              "collect-service-endpoints", "export-data", "depends-on-app", "clean-jobs",
              "apply-terraform-config", "apply-terraform-provider", "create-config",
              "read-config", "list-config", "delete-config", "webhook", "request",
              "check-metrics", "deploy-cloud-resource", "share-cloud-resource",
              "export-service", "generate-jdbc-connection", "vela-cli", "build-push-image")

TERRAFORM_CONFIG_KEYS = frozenset({"source", "deleteResource", "variable",
                                   "writeConnectionSecretToRef", "providerRef", "region",
                                   "jobEnv", "forceDelete"})
TERRAFORM_PROVIDER_KEYS = frozenset({
    "type", "name", "accessKey", "secretKey", "region", "token", "subscriptionID",
    "tenantID", "clientID", "clientSecret", "apiKey", "credentials", "project", "secretID",
    "publicKey", "privateKey", "projectID"})
"""The parameters of vela-core's apply-terraform-config and apply-terraform-provider
(:mod:`.terraform_steps` checks them by provider type; a test keeps both in step)."""

MAX_COMPONENTS = 100
"""Components per Application: KubeVela Applications rarely have more than a dozen or two,
and each costs a render and a placement per deploy step on every reconcile."""
MAX_POLICIES = 100
"""Inline policies per Application (topology, override, health, garbage-collect)."""
MAX_STEPS = 50
"""Workflow steps per Application: KubeVela users rarely have more than a few dozen; the
cap bounds the work of one evaluation and the notifications one release can ask for
(50 steps x 2 URLs)."""
MAX_EXPRESSION = 1000
"""Characters of one ``if`` or ``valueFrom`` expression: KubeVela's are one line."""
MAX_DATA_PASSING = 20
"""``inputs`` or ``outputs`` of one step or component."""
MAX_RENDERED = 500
"""Objects one revision renders over all its deploy steps (each step renders its components
once per topology; a ``k8s-objects`` component counts each manifest): a release of 20
components in 3 stages renders about 120. Rendering and placing cost about a millisecond
an object on the controller's loop, on every reconcile; this keeps one Application's
compile well under a second."""
MAX_URLS_PER_STEP = 2
"""A notification step POSTs to ``webhook.url`` and ``slack.url`` at most: the other
channels (lark, dingding, email) and any other key are refused, so two is the cap by shape."""
MAX_URL_LENGTH = 2048
"""Characters per notification URL: what browsers and proxies commonly take; a Slack or
Teams webhook is under 200."""
MAX_MESSAGE = 4000
"""Characters per notification message: Slack's advice for one message's text (it
truncates at 40,000); the text is also the Event's message and is queued until sent."""


_ModelT = TypeVar("_ModelT", bound="_Model")


class AppError(ValueError):
    """An Application (or Policy) that cannot be honoured; the message names the field.

    Always one line: a field name is the tenant's text (a trait key may hold a newline),
    and the message goes to a terminal, a log line and a status condition."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _null_is_empty(value: Any) -> Any:
    """KubeVela reads ``properties: null`` and ``traits: null`` as absent (Go's nil)."""
    return {} if value is None else value


class Trait(_Model):
    type: str = Field(min_length=1)
    properties: Annotated[dict[str, Any], BeforeValidator(_null_is_empty)] = \
        Field(default_factory=dict)


class StepInput(_Model):
    """KubeVela's ``inputs[]``: the value of output ``from`` written at ``parameterKey``."""

    from_: str = Field(alias="from", min_length=1, max_length=253)
    parameterKey: str = Field(default="", max_length=253)


class StepOutput(_Model):
    """KubeVela's ``outputs[]``: ``valueFrom`` evaluated when the step ends, named."""

    name: str = Field(min_length=1, max_length=253)
    valueFrom: str = Field(min_length=1, max_length=MAX_EXPRESSION)


_Inputs = Annotated[tuple[StepInput, ...], Field(max_length=MAX_DATA_PASSING)]
_Outputs = Annotated[tuple[StepOutput, ...], Field(max_length=MAX_DATA_PASSING)]
_Names = Annotated[tuple[str, ...], Field(max_length=MAX_STEPS)]


class Component(_Model):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    type: str = Field(min_length=1)
    properties: Annotated[dict[str, Any], BeforeValidator(_null_is_empty)] = \
        Field(default_factory=dict)
    traits: Annotated[tuple[Trait, ...], BeforeValidator(lambda v: () if v is None else v)] \
        = ()
    # honoured where an apply-component step applies the component (:mod:`.flow`); not
    # dumped: an override's patched or added component is rendered, not re-parsed
    dependsOn: _Names = Field(default=(), exclude=True)
    inputs: _Inputs = Field(default=(), exclude=True)
    outputs: _Outputs = Field(default=(), exclude=True)
    # the key a replication policy renders this copy with (KubeVela's ReplicaKey, which
    # its JSON leaves out too): private, so no spec can set it; "" for no replication
    _replica_key: str = PrivateAttr(default="")

    @property
    def replica_key(self) -> str:
        return self._replica_key

    def revision(self) -> str:
        """KubeVela's ``context.revision``: a hash of the component as a step renders it
        (vela-core hashes its ApplicationComponent: name, type, properties, traits, data
        passing, replication key), 16 hex digits, so it changes with the component and
        with nothing else (``addRevisionLabel`` puts it on the pods: a changed component
        rolls them). Not vela-core's digits (its Go hash of a Go struct), the same role."""
        content = {**self.model_dump(mode="json"), "dependsOn": list(self.dependsOn),
                   "inputs": [i.model_dump(mode="json") for i in self.inputs],
                   "outputs": [o.model_dump(mode="json") for o in self.outputs],
                   "replicaKey": self._replica_key}
        text = json.dumps(content, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def replicated(self, key: str) -> Component:
        """This component as the copy a replication policy renders for ``key``."""
        copy_ = self.model_copy()
        copy_._replica_key = key
        return copy_


class PolicySpec(_Model):
    name: str = ""
    """KubeVela's name is optional; :func:`parse_spec` names an unnamed policy by its path
    (``spec.policies[2]``), which no named policy can clash with."""
    type: str = Field(min_length=1)
    properties: Annotated[dict[str, Any], BeforeValidator(_null_is_empty)] = \
        Field(default_factory=dict)


class Step(_Model):
    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    properties: dict[str, Any] = Field(default_factory=dict)
    timeout: str | None = None
    if_: str | None = Field(default=None, alias="if", max_length=MAX_EXPRESSION)
    dependsOn: _Names = ()
    inputs: _Inputs = ()
    outputs: _Outputs = ()
    subSteps: Annotated[tuple[Step, ...], Field(max_length=MAX_STEPS)] = ()
    """A ``step-group``'s steps (:mod:`.flow` checks the shape)."""


class Mode(_Model):
    """KubeVela's execution modes: of the steps (default StepByStep when steps are given)
    and of a step group's sub-steps (default DAG)."""

    steps: Literal["DAG", "StepByStep"] | None = None
    subSteps: Literal["DAG", "StepByStep"] | None = None


class Workflow(_Model):
    steps: tuple[Step, ...] = ()
    mode: Mode | None = None


class AppSpec(_Model):
    components: Annotated[tuple[Component, ...],
                          BeforeValidator(lambda v: () if v is None else v)] = ()
    """KubeVela takes an Application without components (a workflow of other steps)."""
    policies: tuple[PolicySpec, ...] = ()
    workflow: Workflow | None = None


class RenderBudget:
    """What one compile may still render (:data:`MAX_RENDERED`), spent as it renders."""

    def __init__(self, limit: int = MAX_RENDERED) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, count: int, where: str) -> None:
        """Count ``count`` rendered objects; :class:`AppError` naming ``where`` (the deploy
        step) once the total passes the limit."""
        self.left -= count
        if self.left < 0:
            raise AppError(f"{where}: the deploy steps render more than {self.limit} objects "
                           "in all (each step renders its components once per topology); "
                           f"this control plane renders at most {self.limit} per Application")


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_seconds(text: str, where: str) -> float:
    """``1h2m3s``, ``10m``, ``30s`` (Go's duration subset KubeVela's examples use)."""
    match = _DURATION.match(text.strip()) if text else None
    if not match or not any(match.groups()):
        raise AppError(f"{where}: {text!r} is not a duration such as 30s, 10m or 1h")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def _path(loc: Sequence[int | str], prefix: str) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _validated(cls: type[_ModelT], raw: Any, where: str) -> _ModelT:
    """``raw`` as ``cls``; a pydantic error becomes :class:`AppError` naming the field."""
    try:
        return cls.model_validate(raw)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        message = "not supported by this control plane" \
            if first["type"] == "extra_forbidden" else first["msg"]
        raise AppError(f"{_path(first['loc'], where)}: {message}") from None


def component(raw: Any, where: str) -> Component:
    """A component written somewhere else than ``spec.components`` (an override's entry
    that adds or replaces one), validated as one (its types: by the renderer)."""
    return _validated(Component, raw, where)


_NOUNS = {"component": "type", "trait": "trait", "policy": "policy", "workflowstep": "step"}
_KINDS: dict[str, vela_core.Kind] = {"component": "component", "trait": "trait",
                                     "policy": "policy", "step": "workflowstep"}
"""A field of :class:`Types`' notes -> the kind of vela-core's definitions it names."""


def not_built_in(kind: vela_core.Kind, name: str, known: Sequence[str]) -> str:
    """``'x' is not a built-in type (...)``: why, for one of vela-core's definitions this
    control plane refuses, else what is built in."""
    why = vela_core.refusal(kind, name)
    if why is not None:
        return f"{name!r} is not a built-in {_NOUNS[kind]} (vela-core's {kind} {name}: {why})"
    return f"{name!r} is not a built-in {_NOUNS[kind]} ({', '.join(known)})"


@dataclasses.dataclass(frozen=True)
class Types:
    """The component and trait types an Application may name: the built-ins, plus the
    definitions an administrator wrote (:mod:`.definitions`)."""

    components: frozenset[str] = frozenset(COMPONENT_TYPES)
    traits: frozenset[str] = frozenset(TRAIT_TYPES)
    notes: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    """(field, type) -> why a definition of that name is not used (a tenant's, refused)."""

    def refuse(self, field: str, name: str, where: str, builtins: Sequence[str]) -> AppError:
        note = self.notes.get((field, name))
        if note:
            return AppError(f"{where}: {name!r}: {note}")
        if "@" in name:
            return AppError(f"{where}: {name!r}: a definition revision (type@version) is "
                            "not known here (none of the definitions given has it)")
        return AppError(f"{where}: {not_built_in(_KINDS[field], name, builtins)}")


BUILT_IN = Types()


def check_types(component: Component, where: str, types: Types = BUILT_IN) -> None:
    """The component's type and its traits' types are known (:class:`AppError`)."""
    if component.type not in types.components:
        raise types.refuse("component", component.type, f"{where}.type", COMPONENT_TYPES)
    for index, trait in enumerate(component.traits):
        if trait.type not in types.traits:
            raise types.refuse("trait", trait.type, f"{where}.traits[{index}].type",
                               TRAIT_TYPES)


def parse_spec(spec: Mapping[str, Any], where: str = "spec", types: Types = BUILT_IN
               ) -> AppSpec:
    """The Application's spec, validated: types, names, steps and their options."""
    _check_counts(spec, where)
    parsed = _named(_validated(AppSpec, spec, where), where)
    _check_names(parsed, where)
    for index, component_ in enumerate(parsed.components):
        check_types(component_, f"{where}.components[{index}]", types)
    for index, policy in enumerate(parsed.policies):
        if policy.type not in POLICY_TYPES:
            raise types.refuse("policy", policy.type, f"{where}.policies[{index}].type",
                               POLICY_TYPES)
    if parsed.workflow is not None:
        for index, step in enumerate(parsed.workflow.steps):
            if step.type not in STEP_TYPES:
                raise types.refuse("step", step.type, f"{where}.workflow.steps[{index}].type",
                                   STEP_TYPES)
            _check_step(step, f"{where}.workflow.steps[{index}]")
            for number, sub in enumerate(step.subSteps):
                _check_step(sub, f"{where}.workflow.steps[{index}].subSteps[{number}]")
    return parsed


def _named(spec: AppSpec, where: str) -> AppSpec:
    """Unnamed policies named by their path (KubeVela's name is optional)."""
    if all(p.name for p in spec.policies):
        return spec
    named = tuple(p if p.name else p.model_copy(update={"name": f"{where}.policies[{i}]"})
                  for i, p in enumerate(spec.policies))
    return spec.model_copy(update={"policies": named})


def _check_counts(spec: Any, where: str) -> None:
    """The list caps, before anything is validated (validation itself costs per item)."""
    if not isinstance(spec, Mapping):
        return  # validation names the type
    workflow = spec.get("workflow")
    caps = (("components", spec.get("components"), MAX_COMPONENTS, "components"),
            ("policies", spec.get("policies"), MAX_POLICIES, "policies"),
            ("workflow.steps", workflow.get("steps") if isinstance(workflow, Mapping)
             else None, MAX_STEPS, "steps"))
    for field, items, cap, noun in caps:
        if isinstance(items, list) and len(items) > cap:
            raise AppError(f"{where}.{field}: {len(items)} {noun}; this control plane takes "
                           f"at most {cap} per Application")


def _check_names(spec: AppSpec, where: str) -> None:
    groups: tuple[tuple[str, Sequence[Component | PolicySpec | Step]], ...] = (
        ("components", spec.components), ("policies", spec.policies),
        ("workflow.steps", spec.workflow.steps if spec.workflow else ()))
    for field, items in groups:
        seen: set[str] = set()
        for index, item in enumerate(items):
            if item.name in seen:
                raise AppError(f"{where}.{field}[{index}].name: {item.name!r} is used twice")
            seen.add(item.name)


def check_step(step: Step, where: str) -> None:
    """A step's type and properties (its place in the workflow: :mod:`.flow`)."""
    _check_step(step, where)


_STEP_PROPERTIES: dict[str, set[str]] = {
    "deploy": {"policies", "parallelism", "auto", "rollbackOnFailure"},
    "suspend": {"duration", "message"}, "approve": {"duration", "message"},
    "notification": {"webhook", "slack", "message"},
    "apply-component": {"component", "cluster", "namespace"},
    "step-group": set(),
    "apply-object": {"value", "cluster"},
    "apply-deployment": {"image", "replicas", "cluster", "cmd"},
    "apply-application": set(), "apply-remaining": {"exceptions"},
    "deploy2runtime": {"clusters"},
    "deploy2env": {"policy", "env", "parallel"},
    "restart-workflow": {"at", "after", "every"},
    "read-object": {"apiVersion", "kind", "name", "namespace", "cluster"},
    "export2config": {"configName", "namespace", "data", "cluster"},
    "export2secret": {"secretName", "namespace", "type", "data", "cluster",
                      "kind", "dockerRegistry"},
    "print-message-in-status": {"message"},
    "collect-service-endpoints": {"name", "namespace", "components", "port",
                                  "portName", "outer", "protocal"},
    "export-data": {"name", "namespace", "kind", "data", "topology"},
    "depends-on-app": {"name", "namespace"},
    "clean-jobs": {"labelselector", "namespace"},
    "apply-terraform-config": set(TERRAFORM_CONFIG_KEYS),
    "apply-terraform-provider": set(TERRAFORM_PROVIDER_KEYS),
    "create-config": {"name", "namespace", "template", "config"},
    "read-config": {"name", "namespace"}, "delete-config": {"name", "namespace"},
    "list-config": {"template", "namespace"},
    "webhook": {"url", "data"},
    "request": {"url", "method", "body", "header"},
    "check-metrics": {"query", "metricEndpoint", "condition", "duration",
                      "failDuration"},
    "deploy-cloud-resource": {"env", "policy"},
    "share-cloud-resource": {"env", "policy", "placements"},
    "export-service": {"name", "namespace", "ip", "port", "targetPort", "topology"},
    "generate-jdbc-connection": {"name", "namespace"},
    "vela-cli": {"command", "image", "serviceAccountName", "storage"},
    "build-push-image": {"kanikoExecutor", "context", "dockerfile", "image", "platform",
                         "buildArgs", "credentials", "verbosity"}}
"""Each step type's properties (anything else is refused by name)."""


def _check_step(step: Step, where: str) -> None:
    if step.type not in STEP_TYPES:
        raise AppError(f"{where}.type: {not_built_in('workflowstep', step.type, STEP_TYPES)}")
    if step.timeout is not None:
        duration_seconds(step.timeout, f"{where}.timeout")
    allowed = _STEP_PROPERTIES[step.type]
    for key in step.properties:
        if key not in allowed:
            raise AppError(f"{where}.properties.{key}: not supported for a {step.type} step "
                           f"({', '.join(sorted(allowed))})")
    props = step.properties
    if step.type == "deploy":
        parallelism = props.get("parallelism", 5)
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise AppError(f"{where}.properties.parallelism: must be an integer >= 1")
        policies = props.get("policies", [])
        if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
            raise AppError(f"{where}.properties.policies: must be a list of policy names")
        if not isinstance(props.get("auto", True), bool):
            raise AppError(f"{where}.properties.auto: true or false")
    if step.type == "apply-component":
        for key in ("component", "cluster", "namespace"):
            if key in props and not isinstance(props[key], str):
                raise AppError(f"{where}.properties.{key}: must be a string")
        if not props.get("component"):
            raise AppError(f"{where}.properties.component: required")
    if step.type in ("suspend", "approve") and "duration" in props:
        duration_seconds(str(props["duration"]), f"{where}.properties.duration")
    if step.type == "notification":
        notification(props, f"{where}.properties")
    if step.type == "restart-workflow":
        restart_schedule(props, f"{where}.properties")
    if step.type == "print-message-in-status" and ("message" in props or not step.inputs):
        status_message(props, f"{where}.properties")  # else the compile, with its inputs


def status_message(props: Mapping[str, Any], where: str) -> str:
    """``print-message-in-status``'s ``message`` (a string, required; at most
    :data:`MAX_MESSAGE` characters: it is kept in the status)."""
    message = props.get("message")
    if not isinstance(message, str):
        raise AppError(f"{where}.message: required, a string")
    if len(message) > MAX_MESSAGE:
        raise AppError(f"{where}.message: {len(message)} characters; at most {MAX_MESSAGE}")
    return message


RESTART_FLOOR_SECONDS = 1.0
"""The shortest recurring restart taken (``every``, the annotation's duration): KubeVela
has no floor, and ``0s`` or ``1ms`` would run the workflow again as soon as each run ends,
without pause. Refused below it rather than raised to it (a value is honoured or refused,
never changed)."""


def restart_schedule(props: Mapping[str, Any], where: str
                     ) -> tuple[float | None, float | None, bool]:
    """KubeVela's ``restart-workflow``: exactly one of ``at`` (an RFC 3339 time), ``after``
    (a duration from when the step runs) or ``every`` (a duration after each run ends), as
    (at or after, every, whether the first is ``after``)."""
    given = [k for k in ("at", "after", "every") if k in props]
    if len(given) != 1:
        raise AppError(f"{where}: exactly one of 'at', 'after', or 'every' must be specified "
                       f"(found {len(given)})")
    key = given[0]
    value = props[key]
    if not isinstance(value, str):
        raise AppError(f"{where}.{key}: must be a string")
    if key == "at":
        return rfc3339(value, f"{where}.at"), None, False
    seconds = duration_seconds(value, f"{where}.{key}")
    if key == "every" and seconds < RESTART_FLOOR_SECONDS:
        raise AppError(f"{where}.every: at least {RESTART_FLOOR_SECONDS:g}s (it restarts the "
                       "workflow that long after each run ends; shorter would restart it "
                       "without pause)")
    return (seconds, None, True) if key == "after" else (None, seconds, False)


def rfc3339(value: str, where: str) -> float:
    """An RFC 3339 time with its zone (``2025-01-20T15:00:00Z``) as epoch seconds."""
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise AppError(f"{where}: {value!r} is not an RFC 3339 time such as "
                       "2025-01-20T15:00:00Z") from None
    if moment.tzinfo is None:
        raise AppError(f"{where}: {value!r} has no time zone (RFC 3339: ...Z)")
    return moment.timestamp()


# -- notification steps ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Notification:
    """A notification step's properties as we honour them."""

    message: str
    """The text of the Event and of every POST (``""``: the controller's default)."""
    urls: tuple[str, ...]
    """Every webhook to POST to: ``webhook.url`` then ``slack.url`` (both when both)."""


_CHANNELS = {"webhook": {"url"}, "slack": {"url", "message"}}
_NO_QUOTE = "(the URL is not repeated here: it may hold a token)"


def notification(props: Mapping[str, Any], where: str) -> Notification:
    """A notification step's ``properties``, each leaf honoured or refused by path.

    ``message`` (text, or a map with one of ``text``/``content``); ``webhook.url`` (ours)
    and KubeVela's ``slack.url`` (a string or ``{value: URL}``) and ``slack.message.text``.
    KubeVela's ``url.secretRef`` is refused: the control plane reads no Secret an
    Application names (its credentials would read them on the author's behalf). Slack's
    ``blocks``, ``attachments``... are refused too: we POST ``{"text": message}`` only."""
    message = _message_text(props["message"], f"{where}.message") if "message" in props \
        else None
    urls: list[str] = []
    for channel, allowed in _CHANNELS.items():
        if channel not in props:
            continue
        here = f"{where}.{channel}"
        raw = props[channel]
        if not isinstance(raw, dict):
            raise AppError(f"{here}: a map with {' and '.join(sorted(allowed))}")
        for key in raw:
            if key not in allowed:
                raise AppError(f"{here}.{key}: not supported ({', '.join(sorted(allowed))})")
        if "url" not in raw:
            raise AppError(f"{here}.url: required")
        urls.append(_url_field(raw["url"], f"{here}.url"))
        if "message" in raw:
            text = _slack_message(raw["message"], f"{here}.message")
            if message is not None:
                raise AppError(f"{here}.message: give the text once, here or in "
                               f"{where}.message")
            message = text
    return Notification(message or "", tuple(urls))


def _bounded(text: str, where: str) -> str:
    if len(text) > MAX_MESSAGE:
        raise AppError(f"{where}: {len(text)} characters; at most {MAX_MESSAGE}")
    return text


def _message_text(raw: Any, where: str) -> str:
    if isinstance(raw, str):
        return _bounded(raw, where)
    if isinstance(raw, dict) and len(raw) == 1 and next(iter(raw)) in ("text", "content"):
        key = next(iter(raw))
        if not isinstance(raw[key], str):
            raise AppError(f"{where}.{key}: a string")
        return _bounded(str(raw[key]), f"{where}.{key}")
    if isinstance(raw, dict):
        extra = sorted(k for k in raw if k not in ("text", "content"))
        if extra:
            raise AppError(f"{where}.{extra[0]}: not supported (text or content)")
    raise AppError(f"{where}: a string, or a map with one of text or content")


def _slack_message(raw: Any, where: str) -> str:
    if not isinstance(raw, dict):
        raise AppError(f"{where}: a map with text")
    for key in raw:
        if key != "text":
            raise AppError(f"{where}.{key}: not supported (only text: the POST body is "
                           '{"text": message})')
    if not isinstance(raw.get("text"), str):
        raise AppError(f"{where}.text: a string")
    return _bounded(str(raw["text"]), f"{where}.text")


def _url_field(raw: Any, where: str) -> str:
    """``url``: the URL itself or KubeVela's ``{value: URL}``."""
    if isinstance(raw, dict):
        for key in raw:
            if key == "secretRef":
                raise AppError(f"{where}.secretRef: not supported: the control plane reads "
                               "no Secret an Application names; give the URL as value")
            if key != "value":
                raise AppError(f"{where}.{key}: not supported (value)")
        if "value" not in raw:
            raise AppError(f"{where}.value: required")
        return check_url(raw["value"], f"{where}.value")
    return check_url(raw, where)


_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)")
_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?$")
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$", re.IGNORECASE)


def check_url(value: Any, where: str) -> str:
    """An ``http(s)`` URL with a valid host (an IP address or a DNS name whose labels are
    1 to 63 characters, IDNA-encodable and round-tripping, the last one not numeric) and
    port, no user name or password, no whitespace or control characters, at most
    :data:`MAX_URL_LENGTH` characters; else :class:`AppError` naming ``where``, never the
    URL.

    Whether the destination may be dialled (loopback, private, metadata addresses...) is
    not decided here: it depends on the operator's allowlist and on what a name resolves
    to when dialled, so the sender checks it at connect time
    (:mod:`federation.contexts.egress`)."""
    if not isinstance(value, str) or not value:
        raise AppError(f"{where}: an http(s) URL")
    if len(value) > MAX_URL_LENGTH:
        raise AppError(f"{where}: longer than {MAX_URL_LENGTH} characters {_NO_QUOTE}")
    if not value.isprintable() or any(c.isspace() for c in value):
        raise AppError(f"{where}: holds whitespace, control or invisible characters {_NO_QUOTE}")
    match = _URL.match(value)
    if match is None or match["scheme"].lower() not in ("http", "https"):
        raise AppError(f"{where}: only http and https URLs are supported {_NO_QUOTE}")
    if "@" in match["authority"]:
        # a POST would send them as Basic credentials to wherever the host points; a
        # webhook's token belongs in its path or query
        raise AppError(f"{where}: holds a user name or password (user:password@), which "
                       f"is not supported {_NO_QUOTE}")
    problem = _authority_problem(match["authority"])
    if problem:
        raise AppError(f"{where}: {problem} {_NO_QUOTE}")
    return value


def _authority_problem(authority: str) -> str | None:
    """``host[:port]``: what is wrong with the host or port, or None."""
    hostport = authority
    if hostport.startswith("["):
        host, bracket, port = hostport[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            return "the host's brackets are not closed"
        port = port[1:]
        if ":" not in host:
            return "only an IPv6 address goes in brackets"
    else:
        host, _, port = hostport.partition(":")
    if port and (not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536):
        return "the port is not a number from 1 to 65535"
    return _host_problem(host.lower())


def _host_problem(host: str) -> str | None:
    if not host:
        return "the URL has no host"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253:
        return "the host name is longer than 253 characters"
    for number, label in enumerate(name.split("."), start=1):
        if not label:
            return f"label {number} of the host name is empty"
        if len(label) > 63:
            return f"label {number} of the host name is longer than 63 characters"
        try:
            encoded = label.encode("idna")
            round_trip = encoded.decode("idna")
        except UnicodeError:
            return f"label {number} of the host name is not a valid IDNA label"
        if len(encoded) > 63:
            return f"label {number} of the host name is longer than 63 characters"
        if round_trip.lower() != label.lower() or not _LABEL.match(encoded.decode("ascii")):
            return f"label {number} of the host name is not a valid DNS label"
    if _NUMERIC_LABEL.match(name.rpartition(".")[2]):
        # 2130706433, 127.1, 0x7f.1: the C resolver reads these as IPv4 addresses
        return "the host is neither an IP address in standard form nor a DNS name " \
               "(its last label is a number)"
    return None


def default_steps(spec: AppSpec) -> tuple[Step, ...]:
    """KubeVela's default workflow when none is given: one deploy step with every topology
    and override policy (or the whole Application to the default target); without either,
    a ``deploy2env`` step per env of each ``env-binding`` policy, named
    ``deploy-<policy>-<env>`` (vela-core's Deploy2EnvWorkflowStepGenerator)."""
    if spec.workflow is not None and spec.workflow.steps:
        return spec.workflow.steps
    names = [p.name for p in spec.policies if p.type in ("topology", "override")]
    envs = [(p.name, env.get("name")) for p in spec.policies if p.type == "env-binding"
            for env in (p.properties.get("envs") or []) if isinstance(env, dict)]
    if not names and envs:
        return tuple(Step(name=f"deploy-{policy}-{env}", type="deploy2env",
                          properties={"policy": policy, "env": env}) for policy, env in envs)
    return (Step(name="deploy", type="deploy", properties={"policies": names}),)


def external_policy(document: Mapping[str, Any]) -> PolicySpec:
    """A ``Policy`` object (KubeVela's external policy: ``type`` and ``properties`` at the
    top level) as the policy entry it stands for."""
    meta = document.get("metadata") or {}
    name = str(meta.get("name") or "")
    where = f"Policy {meta.get('namespace', '')}/{name}"
    extra = set(document) - {"apiVersion", "kind", "metadata", "type", "properties"}
    if extra:
        raise AppError(f"{where}: {sorted(extra)[0]}: not supported by this control plane")
    try:
        policy = PolicySpec.model_validate({"name": name, "type": document.get("type") or "",
                                            "properties": document.get("properties") or {}})
    except pydantic.ValidationError as exc:
        raise AppError(f"{where}: {_path(exc.errors()[0]['loc'], '')[1:]}: "
                       f"{exc.errors()[0]['msg']}") from None
    if policy.type not in POLICY_TYPES:
        raise AppError(f"{where}.type: {not_built_in('policy', policy.type, POLICY_TYPES)}")
    return policy
