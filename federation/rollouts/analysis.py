"""Tenant-sized work on config files as JSON requests and answers, for a worker process.

Parsing a file, diffing two versions and checking new values against a constraint's rules
take time and memory that the file's author chooses: a YAML alias bomb, a line
configparser is quadratic on, a ``pattern`` that backtracks exponentially on a 29-character
value. The rollout controller therefore never does any of it on its event loop: it sends a
request to a worker process (``federation.controllers.rollouts.sandbox``), which runs
:func:`serve` over its stdin and stdout and is killed when an answer is late. This module
is what that worker runs, and it is pure: :func:`answer` maps one request to one answer.

Requests and answers are JSON objects, one per line, so nothing but data crosses the
process boundary (the worker parses hostile input; its answers are not unpickled):

- ``{"op": "diff", "constraint": <ConfigConstraint spec>, "old": <text>, "new": <text>}``
  answers ``{"changes": [[name, kind, class], ...], "invalid": [name, ...]}``: every added,
  changed and removed parameter with its class, and the changed or added ones whose new
  value breaks a rule of ``parametersSchema``. Names only, never a value.
- ``{"op": "online", "constraint": ..., "content": <text>, "names": [name, ...],
  "classes": [class, ...]}`` answers ``{"params": {name: value}}``: the new values, as
  text, of the named parameters of those classes (``dynamic`` when not given; ``static``
  too for a push before a restart): what a reloader is sent.
- Any failure answers ``{"error": <one line>, "reason": <class>, "side": "new"|"old"|""}``:
  the side whose file failed, the reason class of :class:`formats.Reason` (or ``internal``),
  and a message that quotes nothing from the files.

A worker parses each content once: parsed files are kept by SHA-256 of format and content
(:class:`_Parsed`), so the new version is parsed once however many clusters hold an old
copy, and the callers keep answers by request (their own memo) as well.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import IO, Any

import pydantic

from federation.rollouts import formats
from federation.rollouts.constraint import ConfigConstraintSpec, ParameterClass
from federation.rollouts.diff import Change, ChangeKind, Diff, diff_parameters

JSON = dict[str, Any]
READY = b'{"ready": true}\n'
"""The worker's first line: it imported everything and waits for requests."""
MAX_CHANGED = 1000
"""Parameters one file may change in one rollout. Every changed name is carried by the
answer, the controller's loop, the policy's status (``changedParameters``) and, for online
steps, the reloader calls; 1,000 is far more than a reviewed change holds, and keeps the
status small enough to write (a 250,000-parameter file changed whole would not be)."""
TOO_MANY = "too many changes"
INTERNAL = "internal"
"""The reason class of a failure that is no limit and no syntax error (a bug, or a
constraint that does not validate in the worker)."""


# -- requests (built by the caller) -----------------------------------------------------------


def diff_request(constraint: ConfigConstraintSpec, old: str, new: str) -> JSON:
    return {"op": "diff", "constraint": _spec(constraint), "old": old, "new": new}


def online_request(constraint: ConfigConstraintSpec, content: str, names: Sequence[str],
                   classes: Iterable[ParameterClass] = (ParameterClass.DYNAMIC,)) -> JSON:
    return {"op": "online", "constraint": _spec(constraint), "content": content,
            "names": sorted(set(names)), "classes": sorted({c.value for c in classes})}


def _spec(constraint: ConfigConstraintSpec) -> JSON:
    return constraint.model_dump(by_alias=True, mode="json")


def request_key(request: Mapping[str, Any]) -> str:
    """SHA-256 of a request: equal requests have equal answers."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- answers (read by the caller) -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Failure:
    reason: str
    """A :class:`formats.Reason` value, ``timed out``, ``worker stopped`` or ``internal``."""
    message: str
    """One line, quoting nothing from the files."""
    side: str = ""
    """``new`` (the hub's content), ``old`` (a member's copy) or ``""`` (unknown)."""


@dataclasses.dataclass(frozen=True)
class FileDiff:
    changes: tuple[Change, ...]
    """Names, kinds and classes; no values (they stayed in the worker)."""
    invalid: frozenset[str]
    """Changed or added parameters whose new value breaks a rule."""

    def as_diff(self) -> Diff:
        problems = tuple(f"parameter {name!r} breaks a rule" for name in sorted(self.invalid))
        return Diff(self.changes, problems)


def failure(data: Mapping[str, Any]) -> Failure | None:
    if "error" not in data:
        return None
    return Failure(str(data.get("reason") or INTERNAL), str(data["error"]),
                   str(data.get("side") or ""))


def read_diff(data: Mapping[str, Any]) -> FileDiff | Failure:
    failed = failure(data)
    if failed is not None:
        return failed
    changes = tuple(Change(str(name), ChangeKind(kind), ParameterClass(cls))
                    for name, kind, cls in data["changes"])
    return FileDiff(changes, frozenset(str(n) for n in data["invalid"]))


def read_online(data: Mapping[str, Any]) -> dict[str, str] | Failure:
    failed = failure(data)
    if failed is not None:
        return failed
    return {str(k): str(v) for k, v in data["params"].items()}


# -- the worker's side ----------------------------------------------------------------------


class _Parsed:
    """Parsed files (or their errors) by SHA-256 of format and content, least recently used
    dropped first once the contents kept pass :attr:`budget` characters."""

    def __init__(self, budget: int = 32 * 2**20) -> None:
        self.budget = budget
        self.size = 0
        self.entries: collections.OrderedDict[str, tuple[int, formats.Parameters
                                                         | formats.FormatError]] = \
            collections.OrderedDict()

    def parse(self, fmt: formats.FileFormat, content: str) -> formats.Parameters:
        key = hashlib.sha256(f"{fmt.value}\0{content}".encode("utf-8", "surrogatepass")
                             ).hexdigest()
        found = self.entries.get(key)
        if found is None:
            try:
                result: formats.Parameters | formats.FormatError = formats.parse(fmt, content)
            except formats.FormatError as err:
                result = err
            found = (len(content), result)
            self._keep(key, found)
        self.entries.move_to_end(key)
        if isinstance(found[1], formats.FormatError):
            raise found[1]
        return found[1]

    def _keep(self, key: str, entry: tuple[int, formats.Parameters | formats.FormatError]
              ) -> None:
        self.entries[key] = entry
        self.size += entry[0]
        while self.size > self.budget and len(self.entries) > 1:
            _, (size, _) = self.entries.popitem(last=False)
            self.size -= size


_PARSED = _Parsed()


def answer(request: Mapping[str, Any], parsed: _Parsed = _PARSED) -> JSON:
    """The answer to one request; every failure is an answer, never raised."""
    side = ""
    try:
        constraint = ConfigConstraintSpec.model_validate(request["constraint"])
        fmt = constraint.file_format
        if request["op"] == "diff":
            side = "new"
            new = constraint.named(parsed.parse(fmt, str(request["new"])))
            side = "old"
            old = constraint.named(parsed.parse(fmt, str(request["old"])))
            side = ""
            return _diff(constraint, old, new)
        side = "new"
        classes = {ParameterClass(c) for c in request.get("classes") or ["dynamic"]}
        return _online(constraint, constraint.named(parsed.parse(fmt, str(request["content"]))),
                       [str(n) for n in request["names"]], classes)
    except formats.FormatError as err:
        return {"error": str(err), "reason": err.reason.value, "side": side}
    except RecursionError:
        return {"error": "nested too deep to check", "reason": "nested too deep", "side": side}
    except MemoryError:
        return {"error": "too large to hold in memory", "reason": "too large", "side": side}
    except pydantic.ValidationError:
        return {"error": "the constraint does not validate", "reason": INTERNAL}
    except Exception as err:  # a bug must not become a retry loop; name the type only
        return {"error": f"cannot be read ({type(err).__name__})", "reason": INTERNAL,
                "side": side}


def _diff(constraint: ConfigConstraintSpec, old: formats.Parameters,
          new: formats.Parameters) -> JSON:
    result = diff_parameters(constraint, old, new)
    if len(result.changes) > MAX_CHANGED:
        return {"error": f"{len(result.changes)} parameters changed, more than "
                         f"{MAX_CHANGED} in one rollout: roll it in smaller changes",
                "reason": TOO_MANY, "side": ""}
    invalid = sorted({c.name for c in result.changes if c.kind is not ChangeKind.REMOVED
                      and constraint.validate_value(c.name, c.new)})
    return {"changes": [[c.name, c.kind.value, c.parameter_class.value]
                        for c in result.changes], "invalid": invalid}


def _online(constraint: ConfigConstraintSpec, new: formats.Parameters,
            names: Sequence[str], classes: AbstractSet[ParameterClass]) -> JSON:
    params = {name: as_text(new[name]) for name in names
              if name in new and constraint.classify(name) in classes}
    return {"params": params}


def as_text(value: formats.Value) -> str:
    """A parameter's value as a reloader receives it (a list joined with commas)."""
    if isinstance(value, tuple):
        return ",".join(as_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def serve(requests: IO[bytes], answers: IO[bytes],
          arm: Callable[[bool], object] = lambda on: None,
          answer_with: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
    """Answer every request line of ``requests`` with one line on ``answers`` (the worker
    process's loop: its stdin and stdout), after the :data:`READY` line. ``arm(True)``
    before each request and ``arm(False)`` after it: the worker sets an alarm that ends it
    should a request outlive its deadline while nobody is left to kill it. ``answer_with``
    answers a request (default :func:`answer`): the kit's sandbox runs other workers'
    answers over the same line protocol."""
    respond = answer if answer_with is None else answer_with
    answers.write(READY)
    answers.flush()
    for line in requests:
        arm(True)
        try:
            request = json.loads(line)
            reply = respond(request) if isinstance(request, dict) else \
                {"error": "not a request", "reason": INTERNAL}
        except ValueError:
            reply = {"error": "not a request", "reason": INTERNAL}
        arm(False)
        answers.write(json.dumps(reply, ensure_ascii=True).encode() + b"\n")
        answers.flush()
