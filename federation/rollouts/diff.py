"""The diff of two versions of a config file, and the reload action it calls for.

:func:`diff` parses the old and new content with the constraint's file format and lists every
added, changed and removed parameter with its class (dynamic, static, immutable). Values are
compared with their types (``1`` and ``"1"`` differ), so a yaml edit that turns a number into
a string is a change. Only the changed and added values are validated against
``parametersSchema``: a value the fleet already runs was accepted before, and refusing an
unrelated edit because of it would block every rollout.

The verdict of a diff does not depend on any policy: ``refused`` when a value breaks a rule
or an immutable parameter changed (the message names the parameter), ``unchanged`` when no
parameter changed, ``online`` when every change is dynamic, else ``restart``.
:func:`choose` then applies the user's ``reloadPolicy``: ``none`` writes the file and does
nothing else, ``restart`` always restarts, ``online`` refuses a diff with a static change
(naming it) instead of silently restarting, and ``auto`` follows the verdict. A refusal is
never overridden by a policy.

Pure: content comes in as text, a decision goes out; the rollout controller acts on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from federation.rollouts import formats
from federation.rollouts.constraint import ConfigConstraintSpec, ParameterClass
from federation.rollouts.formats import Value


class ChangeKind(enum.StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    REMOVED = "removed"


class ReloadPolicy(enum.StrEnum):
    NONE = "none"
    RESTART = "restart"
    ONLINE = "online"
    AUTO = "auto"


class Action(enum.StrEnum):
    """What the rollout does (a diff's verdict is one of these too, never ``none``)."""

    UNCHANGED = "unchanged"  # no parameter changed: nothing to roll
    NONE = "none"  # write the new content, no reload
    ONLINE = "online"  # push the changed parameters to the running processes
    RESTART = "restart"  # restart the consuming workloads
    REFUSED = "refused"  # roll nothing; the reason names the parameter


@dataclass(frozen=True)
class Change:
    name: str
    kind: ChangeKind
    parameter_class: ParameterClass
    old: Value = None
    """The value before (None when added)."""
    new: Value = None
    """The value after (None when removed)."""


@dataclass(frozen=True)
class Diff:
    changes: tuple[Change, ...]
    problems: tuple[str, ...]
    """Validation failures of the new values, each naming the parameter and the rule."""

    @property
    def verdict(self) -> Action:
        return self.decision().action

    def decision(self) -> Decision:
        """The action the changes call for by themselves (``reloadPolicy: auto``)."""
        if self.problems:
            return Decision(Action.REFUSED, "; ".join(self.problems))
        immutable = self.names(ParameterClass.IMMUTABLE)
        if immutable:
            return Decision(Action.REFUSED, f"immutable parameter {_names(immutable)} changed")
        if not self.changes:
            return Decision(Action.UNCHANGED, "no parameter changed")
        static = self.names(ParameterClass.STATIC)
        if static:
            return Decision(Action.RESTART, f"static parameter {_names(static)} changed")
        return Decision(Action.ONLINE, f"every changed parameter is dynamic: "
                                       f"{_names(self.names(ParameterClass.DYNAMIC))}")

    def names(self, parameter_class: ParameterClass) -> tuple[str, ...]:
        return tuple(c.name for c in self.changes if c.parameter_class is parameter_class)


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


def diff(constraint: ConfigConstraintSpec, old_content: str, new_content: str) -> Diff:
    """The classified changes from ``old_content`` to ``new_content``.

    Raises :class:`formats.FormatError` (naming the format and line) if either does not parse.
    """
    fmt = constraint.file_format
    return diff_parameters(constraint, constraint.named(formats.parse(fmt, old_content)),
                           constraint.named(formats.parse(fmt, new_content)))


def diff_parameters(
    constraint: ConfigConstraintSpec, old: dict[str, Value], new: dict[str, Value]
) -> Diff:
    changes: list[Change] = []
    problems: list[str] = []
    for name, value in new.items():
        if name not in old:
            kind = ChangeKind.ADDED
        elif not formats.same_value(old[name], value):
            kind = ChangeKind.CHANGED
        else:
            continue
        changes.append(Change(name, kind, constraint.classify(name), old.get(name), value))
        problems.extend(constraint.validate_value(name, value))
    changes.extend(
        Change(name, ChangeKind.REMOVED, constraint.classify(name), value)
        for name, value in old.items() if name not in new
    )
    return Diff(tuple(changes), tuple(problems))


def choose(result: Diff, policy: ReloadPolicy) -> Decision:
    """The action of ``reloadPolicy`` for ``result``: refusals and no-ops are never overridden."""
    verdict = result.decision()
    if verdict.action in (Action.REFUSED, Action.UNCHANGED) or policy is ReloadPolicy.AUTO:
        return verdict
    if policy is ReloadPolicy.NONE:
        return Decision(Action.NONE, "reloadPolicy none: the file changes, nothing reloads")
    if policy is ReloadPolicy.RESTART:
        return Decision(Action.RESTART, "reloadPolicy restart")
    if verdict.action is Action.RESTART:
        static = _names(result.names(ParameterClass.STATIC))
        return Decision(Action.REFUSED, f"reloadPolicy online, but static parameter {static} "
                                        "changed and needs a restart")
    return verdict


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(repr(n) for n in names)
