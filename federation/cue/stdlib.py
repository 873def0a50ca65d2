"""The standard packages' functions (``strings``, ``strconv``, ``list``, ``math``,
``struct``, ``regexp``), registered into :data:`federation.cue.builtins.REGISTRY`.

Each is Go's function on plain data; sizes are charged to the meter before building.
"""

from __future__ import annotations

import json
import math
from typing import Any

from federation.cue import regex
from federation.cue.builtins import (
    BuiltinError,
    builtin,
    need,
    need_int,
    need_list,
    need_str,
    number_text,
)
from federation.cue.values import Constraint

# -- strings


@builtin("strings", "Join", 2)
def strings_join(ev: Any, items: Any, sep: Any) -> str:
    parts = [need_str(p) for p in need_list(items)]
    ev.meter.size(sum(map(len, parts)) + len(need_str(sep)) * len(parts))
    return str(sep).join(parts)


@builtin("strings", "Split", 2)
def strings_split(ev: Any, text: Any, sep: Any) -> list[str]:
    text, sep = need_str(text), need_str(sep)
    ev.meter.size(len(text) * (2 if sep == "" else 1))
    return list(text) if sep == "" else list(text.split(sep))


@builtin("strings", "SplitN", 3)
def strings_split_n(ev: Any, text: Any, sep: Any, n: Any) -> list[str]:
    text, sep, count = need_str(text), need_str(sep), need_int(n)
    ev.meter.size(len(text))
    if count == 0:
        return []
    return list(text.split(sep) if count < 0 else text.split(sep, count - 1))


def string_predicate(name: str, fn: Any) -> None:
    def impl(ev: Any, text: Any, other: Any) -> bool:
        ev.meter.size(len(need_str(text)))
        return bool(fn(need_str(text), need_str(other)))

    builtin("strings", name, 2)(impl)


string_predicate("Contains", lambda a, b: b in a)
string_predicate("HasPrefix", lambda a, b: a.startswith(b))
string_predicate("HasSuffix", lambda a, b: a.endswith(b))
string_predicate("ContainsAny", lambda a, b: any(c in a for c in b))
string_predicate("EqualFold", lambda a, b: a.casefold() == b.casefold())


def string_transform(name: str, fn: Any, arity: int = 1) -> None:
    def impl(ev: Any, text: Any, *rest: Any) -> str:
        ev.meter.size(len(need_str(text)) * 2)
        return str(fn(text, *[need_str(r) for r in rest]))

    builtin("strings", name, arity)(impl)


string_transform("ToLower", str.lower)
string_transform("ToUpper", str.upper)
string_transform("ToTitle", str.upper)
string_transform("TrimSpace", str.strip)
string_transform("TrimPrefix", lambda a, b: a[len(b):] if b and a.startswith(b) else a, 2)
string_transform("TrimSuffix", lambda a, b: a[: len(a) - len(b)] if b and a.endswith(b) else a,
                 2)
string_transform("Trim", lambda a, b: a.strip(b), 2)
string_transform("TrimLeft", lambda a, b: a.lstrip(b), 2)
string_transform("TrimRight", lambda a, b: a.rstrip(b), 2)


@builtin("strings", "Replace", 4)
def strings_replace(ev: Any, text: Any, old: Any, new: Any, n: Any) -> str:
    text, old, new, count = need_str(text), need_str(old), need_str(new), need_int(n)
    occurrences = text.count(old) if old else len(text) + 1
    ev.meter.size(len(text) + len(new) * occurrences)
    return str(text.replace(old, new, count if count >= 0 else -1))


@builtin("strings", "Repeat", 2)
def strings_repeat(ev: Any, text: Any, n: Any) -> str:
    count = need_int(n)
    need(count >= 0, "negative count")
    ev.meter.size(len(need_str(text)) * count)
    return str(text) * count


@builtin("strings", "Index", 2)
def strings_index(ev: Any, text: Any, sub: Any) -> int:
    found = need_str(text).encode().find(need_str(sub).encode())
    return found


@builtin("strings", "LastIndex", 2)
def strings_last_index(ev: Any, text: Any, sub: Any) -> int:
    return need_str(text).encode().rfind(need_str(sub).encode())


@builtin("strings", "Count", 2)
def strings_count(ev: Any, text: Any, sub: Any) -> int:
    text, sub = need_str(text), need_str(sub)
    return len(text) + 1 if sub == "" else text.count(sub)


@builtin("strings", "Fields", 1)
def strings_fields(ev: Any, text: Any) -> list[str]:
    ev.meter.size(len(need_str(text)))
    return str(text).split()


@builtin("strings", "SliceRunes", 3)
def strings_slice_runes(ev: Any, text: Any, start: Any, end: Any) -> str:
    text, a, b = need_str(text), need_int(start), need_int(end)
    need(0 <= a <= b <= len(text), "index out of range")
    return str(text[a:b])


@builtin("strings", "Runes", 1)
def strings_runes(ev: Any, text: Any) -> list[int]:
    ev.meter.size(len(need_str(text)))
    return [ord(c) for c in str(text)]


def runes_validator(name: str, test: Any) -> None:
    def impl(ev: Any, limit: Any) -> Constraint:
        bound = need_int(limit)
        return Constraint(frozenset({"string"}),
                          (("call", (f"strings.{name}({bound})", lambda v: test(v, bound))),))

    builtin("strings", name, 1)(impl)


runes_validator("MinRunes", lambda v, n: len(v) >= n)
runes_validator("MaxRunes", lambda v, n: len(v) <= n)

# -- strconv


@builtin("strconv", "FormatInt", 2)
def strconv_format_int(ev: Any, value: Any, base: Any) -> str:
    number, radix = need_int(value), need_int(base)
    need(2 <= radix <= 36, "base out of range")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if number == 0:
        return "0"
    sign, number = ("-", -number) if number < 0 else ("", number)
    out = []
    while number:
        number, rest = divmod(number, radix)
        out.append(digits[rest])
    return sign + "".join(reversed(out))


@builtin("strconv", "Itoa", 1)
def strconv_itoa(ev: Any, value: Any) -> str:
    return str(need_int(value))


@builtin("strconv", "Atoi", 1)
def strconv_atoi(ev: Any, text: Any) -> int:
    text = need_str(text)
    need(len(text) <= 20 and text.lstrip("+-").isdigit() and text[:1] != " ", "invalid syntax")
    return int(text)


@builtin("strconv", "ParseInt", 3)
def strconv_parse_int(ev: Any, text: Any, base: Any, bits: Any) -> int:
    text, radix, size = need_str(text), need_int(base), need_int(bits)
    need(len(text) <= 70 and "_" not in text and text.strip() == text, "invalid syntax")
    value = int(text, radix)
    size = size or 64
    need(-(2 ** (size - 1)) <= value < 2 ** (size - 1), "value out of range")
    return value


@builtin("strconv", "ParseFloat", 2)
def strconv_parse_float(ev: Any, text: Any, bits: Any) -> float:
    text = need_str(text)
    need(len(text) <= 100 and text.strip() == text, "invalid syntax")
    return float(text)


@builtin("strconv", "ParseBool", 1)
def strconv_parse_bool(ev: Any, text: Any) -> bool:
    text = need_str(text)
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    need(text in ("0", "f", "F", "FALSE", "false", "False"), "invalid syntax")
    return False


@builtin("strconv", "FormatBool", 1)
def strconv_format_bool(ev: Any, value: Any) -> str:
    need(isinstance(value, bool), "needs a bool")
    return "true" if value else "false"


@builtin("strconv", "FormatFloat", 4)
def strconv_format_float(ev: Any, value: Any, fmt: Any, prec: Any, bits: Any) -> str:
    need(isinstance(value, int | float) and not isinstance(value, bool), "needs a number")
    precision = need_int(prec)
    if precision < 0:
        return number_text(float(value))
    need(precision <= 100, "precision out of range")
    return f"{float(value):.{precision}{need_str(fmt)}}"


@builtin("strconv", "Quote", 1)
def strconv_quote(ev: Any, text: Any) -> str:
    ev.meter.size(len(need_str(text)) * 6)
    return json.dumps(text, ensure_ascii=False)


@builtin("strconv", "Unquote", 1)
def strconv_unquote(ev: Any, text: Any) -> str:
    text = need_str(text)
    need(text.startswith('"') and text.endswith('"') and len(text) >= 2, "invalid syntax")
    try:
        value = json.loads(text)
    except ValueError:
        raise BuiltinError("invalid syntax") from None
    need(isinstance(value, str), "invalid syntax")
    return str(value)


# -- list


@builtin("list", "Concat", 1)
def list_concat(ev: Any, lists: Any) -> list[Any]:
    out: list[Any] = []
    for item in need_list(lists):
        out.extend(need_list(item))
        ev.meter.size(len(out))
    return out


@builtin("list", "Contains", 2)
def list_contains(ev: Any, items: Any, value: Any) -> bool:
    return any(same(item, value) for item in need_list(items))


def same(a: Any, b: Any) -> bool:
    return (type(a) is type(b) and bool(a == b)) or (
        isinstance(a, int | float) and isinstance(b, int | float)
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


@builtin("list", "FlattenN", 2)
def list_flatten_n(ev: Any, items: Any, depth: Any) -> list[Any]:
    return flatten(ev, need_list(items), need_int(depth))


def flatten(ev: Any, items: list[Any], depth: int) -> list[Any]:
    out: list[Any] = []
    for item in items:
        ev.meter.tick()
        if isinstance(item, list) and depth != 0:
            out.extend(flatten(ev, item, depth - 1))
        else:
            out.append(item)
        ev.meter.size(len(out))
    return out


@builtin("list", "Range", 3)
def list_range(ev: Any, start: Any, limit: Any, step: Any) -> list[Any]:
    for v in (start, limit, step):
        need(isinstance(v, int | float) and not isinstance(v, bool), "needs numbers")
    need(step != 0, "step must not be 0")
    count = max(0, math.ceil((limit - start) / step))
    ev.meter.items(count)
    return [start + i * step for i in range(count)]


@builtin("list", "Drop", 2)
def list_drop(ev: Any, items: Any, n: Any) -> list[Any]:
    count = need_int(n)
    need(count >= 0, "negative count")
    return need_list(items)[count:]


@builtin("list", "Take", 2)
def list_take(ev: Any, items: Any, n: Any) -> list[Any]:
    count = need_int(n)
    need(count >= 0, "negative count")
    return need_list(items)[:count]


@builtin("list", "Slice", 3)
def list_slice(ev: Any, items: Any, start: Any, end: Any) -> list[Any]:
    values, a, b = need_list(items), need_int(start), need_int(end)
    need(0 <= a <= b <= len(values), "index out of range")
    return values[a:b]


@builtin("list", "Repeat", 2)
def list_repeat(ev: Any, items: Any, n: Any) -> list[Any]:
    count = need_int(n)
    need(count >= 0, "negative count")
    ev.meter.items(len(need_list(items)) * count)
    return need_list(items) * count


def list_numbers(name: str, fn: Any) -> None:
    def impl(ev: Any, items: Any) -> Any:
        values = need_list(items)
        need(all(isinstance(v, int | float) and not isinstance(v, bool) for v in values),
             "needs a list of numbers")
        need(bool(values) or name == "Sum", "empty list")
        return fn(values)

    builtin("list", name, 1)(impl)


list_numbers("Sum", sum)
list_numbers("Min", min)
list_numbers("Max", max)


@builtin("list", "SortStrings", 1)
def list_sort_strings(ev: Any, items: Any) -> list[str]:
    values = [need_str(v) for v in need_list(items)]
    ev.meter.size(len(values) * 8)
    return sorted(values)


# -- math


def math_function(name: str, fn: Any) -> None:
    def impl(ev: Any, value: Any) -> Any:
        need(isinstance(value, int | float) and not isinstance(value, bool), "needs a number")
        return fn(value)

    builtin("math", name, 1)(impl)


math_function("Floor", lambda v: float(math.floor(v)))
math_function("Ceil", lambda v: float(math.ceil(v)))
math_function("Round", lambda v: float(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1))
math_function("Trunc", lambda v: float(math.trunc(v)))
math_function("Abs", abs)
math_function("Sqrt", lambda v: math.sqrt(v) if v >= 0 else math.nan)


@builtin("math", "Pow", 2)
def math_pow(ev: Any, x: Any, y: Any) -> float:
    need(all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y)),
         "needs numbers")
    need(abs(y) <= 1024, "exponent too large")
    return float(math.pow(x, y))


# -- struct


def fields_validator(name: str, test: Any) -> None:
    def impl(ev: Any, limit: Any) -> Constraint:
        bound = need_int(limit)
        return Constraint(frozenset({"struct"}),
                          (("call", (f"struct.{name}({bound})", lambda v: test(v, bound))),))

    builtin("struct", name, 1)(impl)


fields_validator("MinFields", lambda v, n: len(v) >= n)
fields_validator("MaxFields", lambda v, n: len(v) <= n)

# -- regexp


@builtin("regexp", "Match", 2)
def regexp_match(ev: Any, pattern: Any, text: Any) -> bool:
    ev.meter.size(len(need_str(text)))
    return regex.search(need_str(pattern), text)


@builtin("regexp", "Find", 2)
def regexp_find(ev: Any, pattern: Any, text: Any) -> str:
    ev.meter.size(len(need_str(text)))
    found = regex.find(need_str(pattern), text)
    need(found is not None, "no match")
    return str(found)


@builtin("regexp", "FindAll", 3)
def regexp_find_all(ev: Any, pattern: Any, text: Any, n: Any) -> list[str]:
    ev.meter.size(len(need_str(text)))
    found = regex.find_all(need_str(pattern), text, need_int(n))
    need(bool(found), "no match")
    return found


@builtin("regexp", "ReplaceAll", 3)
def regexp_replace_all(ev: Any, pattern: Any, text: Any, repl: Any) -> str:
    ev.meter.size(len(need_str(text)) + len(need_str(repl)))
    return replace_all(ev, need_str(pattern), need_str(text), need_str(repl))


def replace_all(ev: Any, pattern: str, text: str, repl: str) -> str:
    """Go's ReplaceAllString: ``$1``/``${name}`` in ``repl`` are groups; only ``$0``
    (the whole match) is supported here, the engine tracks no groups."""
    need("$" not in repl.replace("$0", "").replace("${0}", ""), "only $0 is supported")
    out: list[str] = []
    pos = 0
    program = regex.compile_re2(pattern)
    while pos <= len(text):
        span = regex.run(program, text[pos:], ev.meter.tick)
        if span is None:
            break
        start, end = pos + span[0], pos + span[1]
        out += [text[pos:start], repl.replace("${0}", "$0").replace("$0", text[start:end])]
        if end == start:
            out.append(text[start:start + 1])
        pos = end if end > start else end + 1
        ev.meter.size(sum(map(len, out)))
    out.append(text[pos:])
    return "".join(out)



# -- path (slash-separated, Go's path package; CUE's optional OS argument must be Unix)


def clean(path: str) -> str:
    """Go's path.Clean: the shortest equivalent path by lexical processing."""
    if path == "":
        return "."
    rooted = path.startswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(part)
    joined = "/".join(parts)
    return ("/" + joined) if rooted else (joined or ".")


def path_function(name: str, fn: Any) -> None:
    def impl(ev: Any, value: Any, os: Any = "unix") -> Any:
        need(os in ("unix", "linux", "darwin", "plan9"), "only slash-separated paths")
        ev.meter.size(len(need_str(value)))
        return fn(value)

    builtin("path", name, 1, 2)(impl)


path_function("Clean", clean)
path_function("Base", lambda p: "." if p == "" else (
    "/" if p.strip("/") == "" else p.rstrip("/").rsplit("/", 1)[-1]))
path_function("Dir", lambda p: clean(p[: p.rfind("/") + 1]) if "/" in p else ".")
path_function("Ext", lambda p: (lambda b: b[b.rfind("."):] if "." in b else "")(
    p.rsplit("/", 1)[-1]))


@builtin("path", "Join", 1, 2)
def path_join(ev: Any, parts: Any, os: Any = "unix") -> str:
    items = [need_str(p) for p in need_list(parts)]
    ev.meter.size(sum(map(len, items)))
    joined = "/".join(p for p in items if p)
    return clean(joined) if joined else ""
