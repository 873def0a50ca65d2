"""Graceful-eviction tasks: application failover and state preservation, as Karmada.

Karmada evicts a template from a cluster by moving the cluster from the binding's
``spec.clusters`` to ``spec.gracefulEvictionTasks`` (``GracefulEvictCluster``); the
scheduler then places its replicas elsewhere and never chooses a cluster that has a task
(its ClusterEviction filter), and the graceful-eviction controller ends each task:

- ``suppressDeletion: true`` (purgeMode Never): kept until a user sets it false, then
  ended (the old copy is deleted);
- otherwise ended once every cluster of the new decision has a healthy copy, or after
  its ``gracePeriodSeconds`` (600 s when the task has none).

While a task lasts, its old copy is kept for Gracefully and Never, deleted at once for
Directly. We record tasks with Karmada's field names in the binding
(``spec.gracefulEvictionTasks``) and follow the same rules (pure, here); the propagation
transformers ``application_failover`` and ``eviction_tasks`` apply them.

Application failover (Karmada's applicationfailover controller): a copy whose
InterpretHealth is unhealthy for ``tolerationSeconds`` is evicted. Karmada keeps the
moment it first saw the copy unhealthy in memory; we keep it in the binding
(``spec.unhealthySince``), so a new leader goes on counting from the same moment.

State preservation: at the eviction, each rule's ``jsonPath`` is read from the evicted
copy's last observed status (only the status: :mod:`federation.placement.jsonpath`) into
the task's ``preservedLabelState``; Karmada injects those labels into the new copy when
the latest task is ``Directly``, the template has one target cluster, and that cluster
held no copy before the failover (``clustersBeforeFailover``). The labels go when the
task ends (the next render no longer injects them). Our own labels are never injected,
whatever a binding says.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.hub import failover, overrides
from federation.hub.bindings import BindingError
from federation.placement import jsonpath
from federation.placement import policy as policy_

JSON = dict[str, Any]

TASKS = "gracefulEvictionTasks"
"""The binding's spec field of the tasks (Karmada's name)."""
SINCE = "unhealthySince"
"""The binding's spec field of the unhealthy clocks (ours: Karmada keeps them in memory)."""
APPLICATION_FAILURE = "ApplicationFailure"
"""Karmada's eviction reason for application failover."""
TAINT_UNTOLERATED = "TaintUntolerated"
"""Karmada's eviction reason for cluster failover (a NoExecute taint not tolerated)."""
APPLICATION_PRODUCER = "application-failover"
CLUSTER_PRODUCER = "cluster-failover"
DEFAULT_TIMEOUT = 600.0
"""Karmada's graceful eviction timeout (``--graceful-eviction-timeout``, 10 minutes)."""
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_FIELDS = ("fromCluster", "purgeMode", "reason", "producer", "replicas",
           "gracePeriodSeconds", "suppressDeletion", "preservedLabelState",
           "clustersBeforeFailover", "creationTimestamp")


class PreservationError(ValueError):
    """A rule's value could not be read from the copy's status, or is no label value.
    The message names the rule, never the value (tenant data)."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One ``gracefulEvictionTasks`` entry (Karmada's fields)."""

    from_cluster: str
    purge_mode: str
    reason: str
    producer: str
    created: float
    """``creationTimestamp`` as epoch seconds."""
    replicas: int | None = None
    grace_period_seconds: int | None = None
    suppress_deletion: bool | None = None
    preserved_label_state: Mapping[str, str] = dataclasses.field(default_factory=dict)
    clusters_before_failover: tuple[str, ...] = ()

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Task:
        """Raises :class:`BindingError` naming a field of the wrong shape."""
        where = "spec.gracefulEvictionTasks[]"
        unknown = sorted(set(obj) - set(_FIELDS))
        if unknown:
            raise BindingError(f"{where} has unknown field {str(unknown[0])[:64]!r}")
        created = failover.parse_time(obj.get("creationTimestamp"))
        if created is None:
            raise BindingError(f"{where}.creationTimestamp is not an RFC 3339 time")
        return cls(
            from_cluster=_text(obj.get("fromCluster"), f"{where}.fromCluster", required=True),
            purge_mode=_text(obj.get("purgeMode"), f"{where}.purgeMode"),
            reason=_text(obj.get("reason"), f"{where}.reason"),
            producer=_text(obj.get("producer"), f"{where}.producer"),
            created=created,
            replicas=_whole(obj.get("replicas"), f"{where}.replicas"),
            grace_period_seconds=_whole(obj.get("gracePeriodSeconds"),
                                        f"{where}.gracePeriodSeconds"),
            suppress_deletion=_optional_flag(obj.get("suppressDeletion"),
                                             f"{where}.suppressDeletion"),
            preserved_label_state=_labels(obj.get("preservedLabelState"),
                                          f"{where}.preservedLabelState"),
            clusters_before_failover=tuple(_names(obj.get("clustersBeforeFailover"),
                                                  f"{where}.clustersBeforeFailover")))

    def to_obj(self) -> JSON:
        entry: JSON = {"fromCluster": self.from_cluster, "purgeMode": self.purge_mode,
                       "reason": self.reason, "producer": self.producer,
                       "creationTimestamp": failover.format_time(self.created)}
        optional = (("replicas", self.replicas),
                    ("gracePeriodSeconds", self.grace_period_seconds),
                    ("suppressDeletion", self.suppress_deletion),
                    ("preservedLabelState", dict(self.preserved_label_state) or None),
                    ("clustersBeforeFailover", list(self.clusters_before_failover) or None))
        entry.update({key: value for key, value in optional if value is not None})
        return entry

    @property
    def keeps_copy(self) -> bool:
        """Whether the old copy stays while the task lasts (Directly deletes it at once)."""
        return self.purge_mode != "Directly" or bool(self.suppress_deletion)


def _text(value: Any, field: str, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise BindingError(f"{field} is not a string")
    return value


def _whole(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BindingError(f"{field} is not a whole number >= 0")
    return value


def _optional_flag(value: Any, field: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise BindingError(f"{field} is not true or false")
    return value


def _labels(value: Any, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise BindingError(f"{field} is not a map of strings")
    return dict(value)


def _names(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence) or \
            not all(isinstance(v, str) for v in value):
        raise BindingError(f"{field} is not a list of names")
    return list(value)


def read(entries: Iterable[Mapping[str, Any]]) -> list[Task]:
    return [Task.from_obj(entry) for entry in entries]


def evicting(tasks: Iterable[Task]) -> set[str]:
    """Clusters in the process of eviction: never chosen for the template meanwhile."""
    return {task.from_cluster for task in tasks}


# -- application failover: when a copy has been unhealthy long enough ---------------------


def observe(since: Mapping[str, float], unhealthy: Iterable[str], fine: Iterable[str],
            now: float) -> dict[str, float]:
    """The first-seen-unhealthy moments after this look: unhealthy copies keep theirs (or
    start now), ``fine`` ones (healthy, of unknown health, gone, or on a cluster that is
    not ready) forget theirs, and a copy that could not be read keeps its own.

    A clock starts at the next whole second: the record holds RFC 3339 seconds, and a
    start cut down to the second before would evict up to a second early."""
    fine = set(fine)
    kept = {c: t for c, t in since.items() if c not in fine}
    for cluster in unhealthy:
        kept.setdefault(cluster, float(math.ceil(now)))
    return kept


def due(since: Mapping[str, float], tolerate: int, now: float
        ) -> tuple[list[str], float | None]:
    """Clusters unhealthy for longer than ``tolerate`` seconds, and the next moment another
    one will be (None: none pending)."""
    evict = sorted(c for c, t in since.items() if now > t + tolerate)
    pending = [t + tolerate for c, t in since.items() if c not in evict]
    return evict, (min(pending) if pending else None)


def application_task(behaviour: policy_.ApplicationFailoverBehavior, cluster: str,
                     replicas: int, status: Mapping[str, Any] | None,
                     before: Iterable[str], now: float) -> Task:
    """Karmada's buildTaskOptions for an application failure. Raises
    :class:`PreservationError` when a rule cannot be read (nothing is evicted then)."""
    return Task(from_cluster=cluster, purge_mode=behaviour.purge_mode,
                reason=APPLICATION_FAILURE, producer=APPLICATION_PRODUCER, created=now,
                replicas=replicas or None, grace_period_seconds=behaviour.grace_period,
                suppress_deletion=True if behaviour.purge_mode == "Never" else None,
                **_preserved(behaviour.state_preservation, status, before))


def cluster_task(behaviour: policy_.ClusterFailoverBehavior, cluster: str, replicas: int,
                 status: Mapping[str, Any] | None, before: Iterable[str],
                 now: float) -> Task:
    """The task of a cluster failover (Karmada's taint manager)."""
    return Task(from_cluster=cluster, purge_mode=behaviour.purge_mode,
                reason=TAINT_UNTOLERATED, producer=CLUSTER_PRODUCER, created=now,
                replicas=replicas or None, grace_period_seconds=behaviour.grace_period_seconds,
                **_preserved(behaviour.state_preservation, status, before))


def _preserved(preservation: policy_.StatePreservation | None,
               status: Mapping[str, Any] | None, before: Iterable[str]) -> dict[str, Any]:
    if preservation is None or not preservation.rules:
        return {}
    return {"preserved_label_state": preserved_labels(preservation, status),
            "clusters_before_failover": tuple(sorted(before))}


def preserved_labels(preservation: policy_.StatePreservation,
                     status: Mapping[str, Any] | None) -> dict[str, str]:
    """Each rule's value read from ``status`` (the copy's status, nothing else)."""
    if status is None:
        raise PreservationError("the copy's status has not been observed yet")
    labels: dict[str, str] = {}
    for i, rule in enumerate(preservation.rules):
        try:
            value = jsonpath.evaluate(rule.json_path, status)
        except jsonpath.PathError as exc:
            raise PreservationError(f"statePreservation rule {i}: {exc}") from None
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise PreservationError(f"statePreservation rule {i}: the value read is not a "
                                    "valid label value (at most 63 alphanumerics, '-', '_' "
                                    "or '.')")
        labels[rule.alias_label_name] = value
    return labels


# -- the graceful-eviction controller's rules ------------------------------------------------


def assess(task: Task, now: float, new_copies_healthy: bool) -> bool:
    """Whether ``task`` is kept (Karmada's assessSingleTask)."""
    if task.suppress_deletion is not None:
        return task.suppress_deletion
    if now > task.created + timeout(task):
        return False
    return not new_copies_healthy


def timeout(task: Task) -> float:
    return float(task.grace_period_seconds) if task.grace_period_seconds is not None \
        else DEFAULT_TIMEOUT


def next_look(tasks: Iterable[Task], now: float) -> float | None:
    """Seconds until the earliest timeout of a task that can time out (None: none)."""
    ends = [task.created + timeout(task) - now for task in tasks
            if task.suppress_deletion is None]
    return max(min(ends), 0.0) + 0.1 if ends else None


def injected_labels(tasks: Sequence[Task], cluster: str, targets: Sequence[str]
                    ) -> dict[str, str]:
    """The preserved labels the copy on ``cluster`` carries (Karmada's
    injectReservedLabelState): the latest task's, when it is Directly, the template has
    this one target, and the cluster held no copy before. Our own keys never."""
    if len(targets) > 1 or not tasks:
        return {}
    latest = tasks[-1]
    if latest.purge_mode != "Directly" or cluster in latest.clusters_before_failover:
        return {}
    return {key: value for key, value in latest.preserved_label_state.items()
            if not overrides.is_our_key(key)}
