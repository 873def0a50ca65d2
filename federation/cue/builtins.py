"""CUE's predeclared functions and the standard packages templates may import.

Only pure packages: ``strings``, ``strconv``, ``list``, ``math``, ``struct``, ``regexp``,
``encoding/json``, ``encoding/base64``, ``encoding/yaml`` (Marshal only). Anything else,
KubeVela's providers (``vela/op``, ``vela/kube``...) included, is refused by name at parse
time: those do I/O. Every builtin charges the meter for the size of what it builds.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from typing import Any

from federation.cue.errors import CueError
from federation.cue.values import Atom, Bottom, disjunction

PACKAGES = frozenset({"strings", "strconv", "list", "math", "struct", "regexp", "path",
                      "encoding/json", "encoding/base64", "encoding/yaml"})

Impl = Callable[..., Any]



class Builtin:
    __slots__ = ("arity", "impl", "name", "raw")

    def __init__(self, name: str, impl: Impl, arity: tuple[int, int], raw: bool) -> None:
        self.name = name
        self.impl = impl
        self.arity = arity
        self.raw = raw

    kind_name = "a function"

    def call(self, ev: Any, args: list[Any], pos: str) -> Any:
        low, high = self.arity
        if not low <= len(args) <= high:
            return Bottom(f"{pos}: {self.name} takes {low}..{high} arguments, got {len(args)}")
        from federation.cue import exporting

        try:
            values = args if self.raw else [exporting.plain(ev, a) for a in args]
            result = self.impl(ev, *values)
        except exporting.Incomplete as err:
            return Bottom(f"{pos}: {self.name}: {err}", incomplete=True)
        except BuiltinError as err:
            return Bottom(f"{pos}: {self.name}: {err}")
        except OverflowError:
            return Bottom(f"{pos}: {self.name}: number out of range")
        except (TypeError, ValueError, IndexError) as err:
            if isinstance(err, CueError):
                raise
            return Bottom(f"{pos}: {self.name}: invalid argument ({type(err).__name__})")
        return to_value(ev, result)


class BuiltinError(Exception):
    pass


class Package:
    __slots__ = ("path",)
    kind_name = "a package"

    def __init__(self, path: str) -> None:
        self.path = path

    def member(self, name: str, pos: str) -> Any:
        found = REGISTRY.get(self.path, {}).get(name)
        if found is None:
            return Bottom(f"{pos}: {self.path}.{name} is not supported")
        return found


def to_value(ev: Any, result: Any) -> Any:
    if isinstance(result, dict | list):
        ev.meter.items(len(result))
        return make_data(ev, result)
    if isinstance(result, float) and not math.isfinite(result):
        return Bottom("number out of range")
    if result is None or isinstance(result, bool | int | float | str | bytes):
        return Atom(result)
    return result  # already a value (a vertex, a constraint, a bottom)


def make_data(ev: Any, data: Any) -> Any:
    from federation.cue.evaluator import Data

    return ev.anonymous(Data(data), None)


def make_list(ev: Any, items: list[Any]) -> Any:
    from federation.cue.evaluator import Items

    return ev.anonymous(Items(items), None)


def number_text(value: Any) -> str:
    """A number in an interpolation: an int as digits, a float as CUE prints it (``2.0``)."""
    return repr(value) if isinstance(value, float) else str(value)


REGISTRY: dict[str, dict[str, Builtin]] = {}


def builtin(package: str, name: str, low: int, high: int | None = None,
            raw: bool = False) -> Callable[[Impl], Impl]:
    def register(impl: Impl) -> Impl:
        full = name if package == "" else f"{package.rsplit('/', 1)[-1]}.{name}"
        REGISTRY.setdefault(package, {})[name] = Builtin(
            full, impl, (low, low if high is None else high), raw)
        return impl

    return register


def need(condition: bool, message: str) -> None:
    if not condition:
        raise BuiltinError(message)


def need_str(value: Any) -> str:
    need(isinstance(value, str), "needs a string")
    return str(value)


def need_int(value: Any) -> int:
    need(isinstance(value, int) and not isinstance(value, bool), "needs an int")
    return int(value)


def need_list(value: Any) -> list[Any]:
    need(isinstance(value, list), "needs a list")
    return list(value)


# -- predeclared

@builtin("", "len", 1, raw=True)
def builtin_len(ev: Any, value: Any) -> Any:
    from federation.cue.evaluator import Vertex

    if isinstance(value, Vertex):
        vertex = ev.gather(value)
        if vertex.kind == "list":
            return len(vertex.items)
        if vertex.kind == "struct":
            return sum(1 for _ in ev.fields(vertex))
        value = ev.value(vertex)
    from federation.cue.values import default_of

    value = default_of(value)
    if isinstance(value, Bottom):
        return value
    if isinstance(value, Atom) and isinstance(value.value, str):
        return len(value.value.encode("utf-8", "surrogatepass"))
    if isinstance(value, Atom) and isinstance(value.value, bytes):
        return len(value.value)
    raise BuiltinError("needs a string, bytes, a list or a struct")


@builtin("", "close", 1, raw=True)
def builtin_close(ev: Any, value: Any) -> Any:
    from federation.cue.evaluator import Conjunct, Vertex

    if not isinstance(value, Vertex):
        raise BuiltinError("needs a struct")
    source = ev.gather(value)
    closed = Vertex(source.path)
    closed.regular = True
    group = ("close", id(closed))
    for conjunct in source.target().conjuncts:
        closed.conjuncts.append(Conjunct(conjunct.node, conjunct.env, group))
    return ev.gather(closed)


@builtin("", "and", 1, raw=True)
def builtin_and(ev: Any, value: Any) -> Any:
    from federation.cue.evaluator import Conjunct, Vertex

    vertex = ev.gather(value) if isinstance(value, Vertex) else None
    if vertex is None or vertex.kind != "list":
        raise BuiltinError("needs a list")
    result = Vertex(("and",))
    result.regular = True
    result.conjuncts = [Conjunct(item, None, None) for item in vertex.items]
    return ev.gather(result)


@builtin("", "or", 1, raw=True)
def builtin_or(ev: Any, value: Any) -> Any:
    from federation.cue.evaluator import Vertex

    vertex = ev.gather(value) if isinstance(value, Vertex) else None
    if vertex is None or vertex.kind != "list":
        raise BuiltinError("needs a list")
    branches = [(ev.value(item), False) for item in vertex.items]
    return disjunction(branches, Bottom("or: empty list"))


def integer_division(name: str) -> Impl:
    def divide(ev: Any, a: Any, b: Any) -> int:
        x, y = need_int(a), need_int(b)
        need(y != 0, "division by zero")
        if name in ("div", "mod"):  # Euclidean, as CUE's div and mod
            q = x // y if y > 0 else -(x // -y)
            if x - q * y < 0:
                q += -1 if y > 0 else 1
            return q if name == "div" else x - q * y
        q = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
        return q if name == "quo" else x - q * y

    return divide


for _name in ("div", "mod", "quo", "rem"):
    builtin("", _name, 2)(integer_division(_name))

UNIVERSE: dict[str, Builtin] = REGISTRY[""]


# -- encoding

@builtin("encoding/json", "Marshal", 1)
def json_marshal(ev: Any, value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=bytes_json)
    ev.meter.size(len(text))
    return text


@builtin("encoding/json", "MarshalIndent", 3)
def json_marshal_indent(ev: Any, value: Any, prefix: Any, indent: Any) -> str:
    text = json.dumps(value, indent=need_str(indent), ensure_ascii=False, default=bytes_json)
    ev.meter.size(len(text))
    return text.replace("\n", "\n" + need_str(prefix))


def bytes_json(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError("not JSON")


@builtin("encoding/json", "Unmarshal", 1)
def json_unmarshal(ev: Any, text: Any) -> Any:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    ev.meter.size(len(need_str(text)))
    try:
        return json.loads(text, parse_constant=reject_constant)
    except (json.JSONDecodeError, RecursionError):
        raise BuiltinError("invalid JSON") from None


def reject_constant(name: str) -> Any:
    raise BuiltinError(f"invalid JSON constant {name}")


@builtin("encoding/json", "Valid", 1)
def json_valid(ev: Any, text: Any) -> bool:
    try:
        json_unmarshal(ev, text)
    except BuiltinError:
        return False
    return True


@builtin("encoding/base64", "Encode", 2)
def base64_encode(ev: Any, encoding: Any, data: Any) -> str:
    need(encoding is None, "only the standard encoding (null) is supported")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    need(isinstance(raw, bytes), "needs bytes or a string")
    ev.meter.size(len(raw) * 2)
    return base64.b64encode(raw).decode("ascii")


@builtin("encoding/base64", "Decode", 2)
def base64_decode(ev: Any, encoding: Any, data: Any) -> bytes:
    need(encoding is None, "only the standard encoding (null) is supported")
    ev.meter.size(len(need_str(data) if isinstance(data, str) else data))
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BuiltinError("invalid base64") from None


@builtin("encoding/yaml", "Marshal", 1)
def yaml_marshal(ev: Any, value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)
    ev.meter.size(len(text))
    return str(text)

