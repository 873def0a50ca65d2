"""What the reloader does on ``OnlineUpgradeParams``: one configured action, with a timeout.

The action comes from a YAML file (``fedctl reloader --action FILE``), one of four kinds:

- ``signal``: send ``signal`` (default SIGHUP) to the process whose pid is in ``pidFile``;
- ``exec``: run ``command`` (an argv list) with one ``NAME=VALUE`` argument per changed
  parameter appended, sorted by name;
- ``http``: ``POST`` (or ``method``) JSON ``{"configSpec", "configFile", "params"}`` to ``url``;
- ``template``: render every element of ``command`` (an argv list) by replacing
  ``{{ name }}`` with the parameter's value (or ``configFile`` / ``configSpec``), and run it.

No action ever goes through a shell: parameters are values the caller chose, so an argv
element stays one argument whatever it holds (``; rm -rf /`` is a literal string to the
program), a parameter name cannot start with ``-`` (``--config=/x=1`` would be an
option to it) and a NUL in a value is refused. The call's ``config_file`` and
``config_spec`` (a ConfigMap key and name, which ``{{ configFile }}`` places alone in an
argument) must be such a key or name and not start with ``-`` either, so no ConfigMap key
can become an option of the program. A template element that names a parameter
the request does not carry fails the call with the name, rather than running a command
with a hole in it. A parameter *value* placed alone in a template element may still
start with ``-`` (a negative number is a value): write ``--opt={{ name }}`` when that matters
to the program. Every unknown field in
the file is refused with its name (pydantic ``extra=forbid``).

The result is ok/failed with the action's output, bounded to its last
:data:`MAX_OUTPUT` bytes. Nothing here logs a parameter value or the URL (either may hold a
secret): logs name the action's kind, the parameters' names and the exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from federation.untrusted import documents

MAX_OUTPUT = 4096
"""Bytes of output kept (the tail): enough for an error message, small enough for a gRPC
answer and a status field, and a chatty program cannot fill the reloader's memory."""
DEFAULT_TIMEOUT = 30.0
"""Seconds an action may take: a reload is a signal or a short command; one that hangs
must not hold the rollout forever, and the caller is told it timed out."""
MAX_TIMEOUT = 300.0
"""The largest ``timeout`` an action file may set (finite: ``.inf`` is refused): calls are
serialised, so one action's timeout is how long every later call may wait."""
MAX_ACTION_FILE = 64 * 1024
"""Bytes of an action file: a few lines; a larger file is a mistake (or an attack on the
loader), refused before it is parsed."""
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,252}")
"""A parameter name: never starting with ``-``, so ``NAME=VALUE`` cannot be an option."""
_KEY = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.\-]{0,252}")
"""A ConfigMap key or name (``config_file``, ``config_spec``), never starting with ``-``."""


class ActionError(ValueError):
    """An action file that cannot be used (the message names the field)."""


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)


class SignalAction(_Base):
    kind: Literal["signal"]
    pid_file: Path = Field(alias="pidFile")
    signal: str = "SIGHUP"

    @field_validator("signal")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in signal.Signals.__members__:
            raise ValueError(f"unknown signal {value!r} (e.g. SIGHUP, SIGUSR1)")
        return value


class ExecAction(_Base):
    kind: Literal["exec"]
    command: list[str] = Field(min_length=1)


class TemplateAction(_Base):
    kind: Literal["template"]
    command: list[str] = Field(min_length=1)


class HttpAction(_Base):
    kind: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    method: Literal["POST", "PUT"] = "POST"


Action = Annotated[SignalAction | ExecAction | TemplateAction | HttpAction,
                   Field(discriminator="kind")]


KINDS = ("signal", "exec", "template", "http")


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Action


def parse(data: object) -> SignalAction | ExecAction | TemplateAction | HttpAction:
    try:
        return _File.model_validate({"action": data}).action
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first["loc"][1:]]
        if len(loc) > 1 and loc[0] in KINDS:
            loc = loc[1:]  # pydantic names the union's member; the file does not
        where = ".".join(["action", *loc])
        raise ActionError(f"{where}: {first['msg']}") from None


_FILE_LIMITS = documents.Limits(max_bytes=MAX_ACTION_FILE, max_depth=10, max_nodes=1000,
                                max_documents=1)


def load(path: Path) -> SignalAction | ExecAction | TemplateAction | HttpAction:
    """The action of a file, read through the capped loader: whatever the file holds, the
    result is an action or one :class:`ActionError` line naming the file."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_ACTION_FILE + 1)  # never more, however large the file
        found = documents.yaml_documents(documents.decode(data, _FILE_LIMITS), _FILE_LIMITS)
    except OSError as exc:
        raise ActionError(f"{path}: {exc.strerror}") from None
    except documents.TextError as exc:
        raise ActionError(f"{path}: {exc}") from None
    if not found:
        raise ActionError(f"{path}: empty (it needs one action)")
    try:
        return parse(found[0])
    except ActionError as exc:
        raise ActionError(f"{path}: {exc}") from None


@dataclasses.dataclass(frozen=True)
class Request:
    config_spec: str
    config_file: str
    params: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class Outcome:
    ok: bool
    message: str = ""
    """Why it failed (empty when ok); never a parameter value."""
    output: str = ""


def check(request: Request) -> str | None:
    """Why the request cannot be passed on (None: it can). Names are shown, values never
    (they may be secrets)."""
    for field, text in (("config_file", request.config_file),
                        ("config_spec", request.config_spec)):
        if text and not _KEY.fullmatch(text):
            return (f"{field} must be a ConfigMap key or name (letters, digits, '_', '.', "
                    "'-'; at most 253) and not start with '-'")
    for name, value in request.params.items():
        if not _NAME.fullmatch(name):
            return (f"parameter name {name[:64]!r} must be letters, digits, '_', '.' or '-' "
                    "and not start with '-'")
        if "\0" in value:
            return f"parameter {name!r}: a NUL character cannot be passed to a program"
    return None


def _tail(data: bytes) -> str:
    return data[-MAX_OUTPUT:].decode(errors="replace")


def read_pid(pid_file: Path) -> int:
    try:
        text = pid_file.read_text().strip()
    except OSError as exc:
        raise ActionError(f"pid file {pid_file}: {exc.strerror}") from None
    if not text.isdigit() or int(text) <= 1:
        raise ActionError(f"pid file {pid_file}: does not hold a process id")
    return int(text)


def send(pid_file: Path, signum: signal.Signals) -> Outcome:
    try:
        pid = read_pid(pid_file)
        os.kill(pid, signum)
    except ActionError as exc:
        return Outcome(False, str(exc))
    except ProcessLookupError:
        return Outcome(False, f"no process {pid} (from {pid_file})")
    except PermissionError:
        return Outcome(False, f"not allowed to signal process {pid}")
    return Outcome(True, output=f"sent {signum.name} to process {pid}")


def render(command: list[str], request: Request) -> list[str]:
    """The argv of a template: each element stays one argument (values are never split)."""
    names = {"configFile": request.config_file, "configSpec": request.config_spec,
             **request.params}

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            raise ActionError(f"template: the request has no parameter {name!r}")
        return names[name]

    return [_PLACEHOLDER.sub(value, element) for element in command]


async def _exec(argv: list[str], timeout: float) -> Outcome:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return Outcome(False, f"cannot run {argv[0]}: {exc.strerror}")
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        _kill_group(process.pid)
        await process.wait()
        return Outcome(False, f"{argv[0]} timed out after {timeout:g}s")
    except asyncio.CancelledError:
        # The caller gave up (its deadline passed, or the reloader is stopping): an action
        # nobody waits for would outlive its timeout and overlap the next call, which the
        # one-call-at-a-time rule forbids.
        _kill_group(process.pid)
        raise
    if process.returncode != 0:
        return Outcome(False, f"{argv[0]} exited with status {process.returncode}",
                       _tail(output))
    return Outcome(True, output=_tail(output))


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # its children too: it had its own session


async def _http(action: HttpAction, request: Request) -> Outcome:
    body = {"configSpec": request.config_spec, "configFile": request.config_file,
            "params": dict(request.params)}
    timeout = aiohttp.ClientTimeout(total=action.timeout)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.request(
                action.method, action.url, data=json.dumps(body),
                headers={"Content-Type": "application/json"}) as response:
            text = _tail(await response.content.read(MAX_OUTPUT * 4))
            if response.status >= 300:
                return Outcome(False, f"http action: status {response.status}", text)
            return Outcome(True, output=text)
    except TimeoutError:
        return Outcome(False, f"http action timed out after {action.timeout:g}s")
    except aiohttp.ClientError as exc:
        return Outcome(False, f"http action failed: {type(exc).__name__}")


async def run(action: SignalAction | ExecAction | TemplateAction | HttpAction,
              request: Request) -> Outcome:
    """Run ``action`` for ``request``; every failure is an :class:`Outcome`, not raised."""
    why = check(request)
    if why is not None:
        return Outcome(False, why)
    if isinstance(action, SignalAction):
        return send(action.pid_file, signal.Signals[action.signal])
    if isinstance(action, ExecAction):
        extra = [f"{name}={request.params[name]}" for name in sorted(request.params)]
        return await _exec([*action.command, *extra], action.timeout)
    if isinstance(action, TemplateAction):
        try:
            argv = render(action.command, request)
        except ActionError as exc:
            return Outcome(False, str(exc))
        return await _exec(argv, action.timeout)
    return await _http(action, request)
