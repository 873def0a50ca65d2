"""Configuration files as flat parameter maps: parse and render, one pair per file format.

A reconfiguration is judged parameter by parameter, so every format is reduced to the same
shape: an ordered map from a parameter name to a scalar value. Nested formats (yaml, json,
toml) join the path of keys with dots (``server.port``); ini joins the section and the key
(``mysqld.max_connections``); properties and env files are flat already. Line-oriented formats
(ini, properties, env) carry strings only; the structured ones keep their types, and a list of
scalars is one parameter whose value is a tuple (a list is replaced as a whole, never diffed
element by element).

``render`` is the inverse of ``parse`` for every map that ``parse`` can produce, which the
property tests check per format. Anything that a flat map cannot represent faithfully is
refused rather than dropped: a key containing a dot in a nested format, an empty mapping, a
list of mappings, a null in toml, a duplicate key. Every error is a :class:`FormatError` whose
message starts with the format and names the line or the key.

Parsing is bounded (:class:`Limits`): a config file is tenant data, and the parsers behind
``parse`` are recursive (json, toml, the YAML constructor), expand aliases (YAML) or are
quadratic on some lines (configparser), so before or while they run the content is held to a
size, a nesting depth, a number of values after alias expansion and, for ini, a line shape.
YAML goes through :mod:`federation.untrusted.documents`, the one capped loader. A limit
crossed, a ``RecursionError`` or any parser failure is a :class:`FormatError` with a
:attr:`~FormatError.reason` class (``too large``, ``nested too deep``, ``too many values``,
``line too long``, ``syntax``...). No limit here bounds time: a caller that must not hang
(the rollout controller) runs ``parse`` in a worker process with a deadline
(:mod:`federation.rollouts.analysis`).

Error messages never quote the file: parsers' own messages are stripped of every quoted
span and anchor name (``found undefined alias 'S3cret'`` reads ``found undefined alias``),
because a Secret-backed file's content would otherwise reach a status.

The module is pure (no I/O): callers pass file content as text.
"""

from __future__ import annotations

import configparser
import dataclasses
import enum
import json
import math
import re
import tomllib
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator, Mapping

import yaml

from federation.untrusted import documents
from federation.untrusted.text import unquoted

Scalar = str | int | float | bool | None
Value = Scalar | tuple[Scalar, ...]
Parameters = dict[str, Value]


class FileFormat(enum.StrEnum):
    """The file formats we can diff (KubeBlocks' names, with ``env`` for its ``dotenv``)."""

    INI = "ini"
    YAML = "yaml"
    JSON = "json"
    PROPERTIES = "properties"
    TOML = "toml"
    ENV = "env"
    REDIS = "redis"
    PROPS_PLUS = "props-plus"
    PROPS_ULTRA = "props-ultra"
    XML = "xml"


class Reason(enum.StrEnum):
    """Why content was refused, as a class a condition can name."""

    SYNTAX = "syntax"
    TOO_LARGE = "too large"
    LINE_TOO_LONG = "line too long"
    NESTED_TOO_DEEP = "nested too deep"
    TOO_MANY_VALUES = "too many values"
    RECURSIVE_ALIAS = "recursive alias"
    DOCUMENTS = "more than one document"
    SHAPE = "not a flat parameter map"


class FormatError(ValueError):
    """Content that does not parse, or a parameter map that the format cannot hold."""

    def __init__(self, file_format: FileFormat, message: str,
                 reason: Reason = Reason.SHAPE) -> None:
        super().__init__(f"{file_format.value}: {message}")
        self.file_format = file_format
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Limits:
    """Bounds on one config file; each failure names the limit it crossed."""

    max_bytes: int = 2 * 2**20
    """2 MiB of UTF-8: a ConfigMap or Secret holds at most 1 MiB in all, so no real file is
    refused, and the largest accepted parses in a few seconds in the worker."""
    max_depth: int = 64
    """Nesting levels of yaml, json and toml: configs nest a handful of levels; 64 keeps
    the recursive parsers and the flattening far from Python's stack limit (a 5,000-level
    document used to raise RecursionError out of the rollout controller)."""
    max_values: int = 250_000
    """Values after YAML alias expansion (and in json/toml): a 900 KiB YAML file of small
    mappings has about 120,000; an alias bomb asks for billions."""
    max_key_spaces: int = 64
    """ini: the longest run of blanks before a line's ``=``/``:``. configparser's option
    pattern backtracks quadratically over such a run (a 45 KB line of blanks took a
    minute); no key needs more than a few."""
    max_line: int = 256 * 1024
    """ini: characters per line (a base64 certificate on one line fits)."""


LIMITS = Limits()


def parse(file_format: FileFormat, content: str, limits: Limits = LIMITS) -> Parameters:
    """The flat parameters of ``content`` in ``file_format``, within ``limits``."""
    if len(content) > limits.max_bytes or len(content.encode(errors="replace")) > \
            limits.max_bytes:
        raise FormatError(file_format, f"larger than the limit of {limits.max_bytes} bytes",
                          Reason.TOO_LARGE)
    try:
        return _PARSERS[file_format](content, limits)
    except RecursionError:
        raise FormatError(file_format, f"nested deeper than {limits.max_depth} levels",
                          Reason.NESTED_TOO_DEEP) from None
    except MemoryError:
        raise FormatError(file_format, "too large to hold in memory",
                          Reason.TOO_LARGE) from None


def render(file_format: FileFormat, parameters: Mapping[str, Value]) -> str:
    """File content in ``file_format`` whose parameters are ``parameters``."""
    return _RENDERERS[file_format](parameters)


def same_value(a: Value, b: Value) -> bool:
    """Equality that tells ``1``, ``1.0``, ``True`` and ``"1"`` apart (Python's ``==`` does not)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# --- nested formats: flatten and unflatten -------------------------------------------------


def _flatten(fmt: FileFormat, tree: object, allow_null: bool = True) -> Parameters:
    if not isinstance(tree, dict):
        raise FormatError(fmt, f"the document must be a mapping at the top, not {_kind(tree)}")
    out: Parameters = {}
    _flatten_into(fmt, tree, "", out, allow_null)
    return out


def _flatten_into(
    fmt: FileFormat, tree: dict[object, object], prefix: str, out: Parameters, allow_null: bool
) -> None:
    for key, value in tree.items():
        if not isinstance(key, str):
            raise FormatError(fmt, f"key {key!r} under {prefix or 'the top'!r} is not a string")
        if "." in key or key == "":
            raise FormatError(fmt, f"key {prefix + key!r}: an empty key or one with a dot "
                                   "cannot be a parameter name (dots join nested keys)")
        name = prefix + key
        if isinstance(value, dict):
            if not value:
                raise FormatError(fmt, f"key {name!r} is an empty mapping, which has no parameters")
            _flatten_into(fmt, value, name + ".", out, allow_null)
        else:
            out[name] = _leaf(fmt, name, value, allow_null)


def _leaf(fmt: FileFormat, name: str, value: object, allow_null: bool) -> Value:
    if isinstance(value, list):
        return tuple(_scalar(fmt, f"{name}[{i}]", item, allow_null) for i, item in enumerate(value))
    return _scalar(fmt, name, value, allow_null)


def _scalar(fmt: FileFormat, name: str, value: object, allow_null: bool) -> Scalar:
    if value is None and allow_null:
        return None
    if isinstance(value, str | int | float | bool) and value is not None:
        return value
    raise FormatError(fmt, f"key {name!r}: a value of type {_kind(value)} is not supported")


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _unflatten(fmt: FileFormat, parameters: Mapping[str, Value]) -> dict[str, object]:
    tree: dict[str, object] = {}
    for name, value in parameters.items():
        parts = name.split(".")
        if any(not part for part in parts):
            raise FormatError(fmt, f"parameter {name!r} has an empty key segment")
        node = tree
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise FormatError(fmt, f"parameter {name!r} is nested under a value")
            node = child
        if parts[-1] in node:
            raise FormatError(fmt, f"parameter {name!r} collides with a nested parameter")
        node[parts[-1]] = list(value) if isinstance(value, tuple) else value
    return tree


# --- yaml ----------------------------------------------------------------------------------


def _parse_yaml(content: str, limits: Limits) -> Parameters:
    try:
        found = documents.yaml_documents(content, _document_limits(limits), quote=False)
    except documents.TextError as err:
        raise _untrusted(FileFormat.YAML, err) from None
    return _flatten(FileFormat.YAML, found[0] if found else {})


def _document_limits(limits: Limits) -> documents.Limits:
    return documents.Limits(max_bytes=limits.max_bytes, max_depth=limits.max_depth,
                            max_nodes=limits.max_values, max_documents=1)


# The capped loader's reason classes as ours (encoding and syntax problems are syntax).
_TEXT_REASONS = {documents.Reason.SIZE: Reason.TOO_LARGE,
                 documents.Reason.DEPTH: Reason.NESTED_TOO_DEEP,
                 documents.Reason.VALUES: Reason.TOO_MANY_VALUES,
                 documents.Reason.DOCUMENTS: Reason.DOCUMENTS}


def _untrusted(fmt: FileFormat, err: documents.TextError) -> FormatError:
    text = str(err).removeprefix("malformed YAML: ").removeprefix("malformed JSON: ")
    reason = _TEXT_REASONS.get(err.reason, Reason.SYNTAX)
    if reason is Reason.TOO_MANY_VALUES and text.startswith("recursive alias"):
        reason = Reason.RECURSIVE_ALIAS  # infinite values: the loader's own class for it
    return FormatError(fmt, text, reason)  # the loader left out what it quoted (quote=False)


def _render_yaml(parameters: Mapping[str, Value]) -> str:
    # ASCII output: with allow_unicode, PyYAML writes U+0085 (a YAML line break) raw inside
    # a quoted key and reads it back as a space (found by the round-trip property test).
    tree = _unflatten(FileFormat.YAML, parameters)
    return yaml.safe_dump(tree, sort_keys=False) if tree else ""


# --- json ----------------------------------------------------------------------------------


def _parse_json(content: str, limits: Limits) -> Parameters:
    try:
        # The capped loader first (depth, values); once it passed, the second parse, which
        # refuses duplicate keys, is as bounded.
        documents.json_document(content, _document_limits(limits))
        tree = json.loads(content, object_pairs_hook=_json_pairs)
    except documents.TextError as err:
        raise _untrusted(FileFormat.JSON, err) from None
    except json.JSONDecodeError as err:
        raise FormatError(FileFormat.JSON, f"line {err.lineno}: {err.msg}",
                          Reason.SYNTAX) from None
    except FormatError:
        raise
    except ValueError as err:  # e.g. an integer beyond Python's digit limit
        raise FormatError(FileFormat.JSON, unquoted(str(err)), Reason.SYNTAX) from None
    return _flatten(FileFormat.JSON, tree)


def _json_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise FormatError(FileFormat.JSON, f"key {key!r} appears twice")
        out[key] = value
    return out


def _render_json(parameters: Mapping[str, Value]) -> str:
    return json.dumps(_unflatten(FileFormat.JSON, parameters), indent=2, ensure_ascii=False) + "\n"


# --- toml ----------------------------------------------------------------------------------


def _parse_toml(content: str, limits: Limits) -> Parameters:
    try:
        tree = tomllib.loads(content)  # recursive: a RecursionError is caught by parse
    except ValueError as err:  # TOMLDecodeError names the line; also oversized integers
        raise FormatError(FileFormat.TOML, unquoted(str(err)), Reason.SYNTAX) from None
    _check_shape(FileFormat.TOML, tree, limits)
    return _flatten(FileFormat.TOML, tree, allow_null=False)


def _check_shape(fmt: FileFormat, tree: object, limits: Limits) -> None:
    """Depth and value count of a parsed tree, without recursion."""
    pending: list[tuple[object, int]] = [(tree, 0)]
    values = 0
    while pending:
        node, depth = pending.pop()
        values += 1
        if depth > limits.max_depth:
            raise FormatError(fmt, f"nested deeper than {limits.max_depth} levels",
                              Reason.NESTED_TOO_DEEP)
        if values > limits.max_values:
            raise FormatError(fmt, f"more than {limits.max_values} values",
                              Reason.TOO_MANY_VALUES)
        children = node.values() if isinstance(node, dict) else \
            node if isinstance(node, list) else ()
        pending.extend((child, depth + 1) for child in children)


def _render_toml(parameters: Mapping[str, Value]) -> str:
    # Every parameter becomes one dotted-key line: valid TOML for any nesting, and simpler
    # than choosing tables (so no writer library is needed).
    _unflatten(FileFormat.TOML, parameters)  # refuses prefix collisions, as for the others
    lines = []
    for name, value in parameters.items():
        key = ".".join(_toml_string(part) for part in name.split("."))
        lines.append(f"{key} = {_toml_value(name, value)}")
    return "".join(line + "\n" for line in lines)


def _toml_value(name: str, value: Value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml_value(name, item) for item in value) + "]"
    if value is None:
        raise FormatError(FileFormat.TOML, f"parameter {name!r}: toml has no null value")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return _toml_string(value)


def _toml_string(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


# --- ini -----------------------------------------------------------------------------------

# A default section name no file can use, so [DEFAULT] is an ordinary section and its keys
# are not copied into every other section (configparser's inheritance would invent changes).
_NO_DEFAULT_SECTION = "\x00"


_INI_BAD_KEY = re.compile(r"^[#;\[]|[=:]|^$")


def _ini_parser() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(
        default_section=_NO_DEFAULT_SECTION, strict=True, interpolation=None,
        allow_no_value=False, empty_lines_in_values=False,
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case
    return parser


_INI_KEY_END = re.compile(r"[=:]")


def _check_ini_lines(content: str, limits: Limits) -> None:
    """Refuse the lines configparser's option pattern is quadratic on (see
    :attr:`Limits.max_key_spaces`); comments and section headers are not matched by it."""
    blanks = re.compile(rf"\s{{{limits.max_key_spaces + 1},}}")
    for number, raw in enumerate(content.splitlines(), start=1):
        if len(raw) > limits.max_line:
            raise FormatError(FileFormat.INI, f"line {number}: longer than {limits.max_line} "
                                              "characters", Reason.LINE_TOO_LONG)
        line = raw.strip()
        if not line or line[0] in "#;[":
            continue
        end = _INI_KEY_END.search(line)
        if blanks.search(line, 0, end.start() if end else len(line)):
            raise FormatError(FileFormat.INI, f"line {number}: more than "
                                              f"{limits.max_key_spaces} blanks in a row "
                                              "before the '='", Reason.LINE_TOO_LONG)


def _parse_ini(content: str, limits: Limits) -> Parameters:
    _check_ini_lines(content, limits)
    parser = _ini_parser()
    try:
        parser.read_string(content)
    except configparser.Error as err:
        raise FormatError(FileFormat.INI, _ini_error(err), Reason.SYNTAX) from None
    out: Parameters = {}
    for section in parser.sections():
        if "." in section:
            raise FormatError(FileFormat.INI, f"section [{section}]: a dot in a section name "
                                              "is ambiguous in parameter names")
        for key, value in parser.items(section):
            out[f"{section}.{key}"] = value
    return out


def _ini_error(err: configparser.Error) -> str:
    # configparser's own messages quote the offending line, which may hold a password: name
    # the line number and the section or key only.
    if isinstance(err, configparser.MissingSectionHeaderError):
        return f"line {err.lineno}: a key before any [section]"
    if isinstance(err, configparser.ParsingError):
        return f"line {err.errors[0][0]}: not 'key = value'"
    if isinstance(err, configparser.DuplicateSectionError):
        return f"line {err.lineno}: section [{err.section}] appears twice"
    if isinstance(err, configparser.DuplicateOptionError):
        return f"line {err.lineno}: key {err.option!r} appears twice in [{err.section}]"
    return f"unreadable ({type(err).__name__})"


def _render_ini(parameters: Mapping[str, Value]) -> str:
    sections: dict[str, list[str]] = {}
    for name, value in parameters.items():
        section, dot, key = name.partition(".")
        if not dot or not section or not key:
            raise FormatError(FileFormat.INI, f"parameter {name!r} is not 'section.key'")
        text = _line_value(FileFormat.INI, name, value)
        if _INI_BAD_KEY.search(key) or key != key.strip() or "]" in section or "[" in section:
            raise FormatError(FileFormat.INI, f"parameter {name!r}: not a plain section and key")
        if text != text.strip():
            raise FormatError(FileFormat.INI, f"parameter {name!r}: edge spaces would be lost")
        sections.setdefault(section, []).append(f"{key} = {text}")
    return "\n".join(f"[{s}]\n" + "".join(line + "\n" for line in lines)
                     for s, lines in sections.items())


def _line_value(fmt: FileFormat, name: str, value: Value) -> str:
    if not isinstance(value, str):
        raise FormatError(fmt, f"parameter {name!r}: values are strings in this format, "
                               f"not {_kind(value)}")
    if len((value + "x").splitlines()) != 1:
        raise FormatError(fmt, f"parameter {name!r}: a value cannot span lines")
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- properties (Java) ---------------------------------------------------------------------

# A simplified dialect: one `key=value`, `key: value` or `key value` per line, `#`/`!` comments.
# Backslash escapes are kept as written and continuation lines are refused (not joined), so a
# parameter's text is exactly what the file holds.

_PROPERTIES_SPLIT = re.compile(r"\s*[=:]\s*|\s+")


def _logical_lines(content: str) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(content.splitlines(), start=1):
        line = raw.strip()
        if line and line[0] not in "#!":
            yield number, line


def _parse_properties(content: str, limits: Limits) -> Parameters:
    out: Parameters = {}
    for number, line in _logical_lines(content):
        if line.endswith("\\"):
            raise FormatError(FileFormat.PROPERTIES,
                              f"line {number}: continuation lines are not supported", Reason.SYNTAX)
        parts = _PROPERTIES_SPLIT.split(line, maxsplit=1)
        key, value = parts[0], parts[1] if len(parts) > 1 else ""
        if key in out:
            raise FormatError(FileFormat.PROPERTIES, f"line {number}: key {key!r} appears twice",
                              Reason.SYNTAX)
        out[key] = value
    return out


def _render_properties(parameters: Mapping[str, Value]) -> str:
    lines = []
    for name, value in parameters.items():
        text = _line_value(FileFormat.PROPERTIES, name, value)
        if not name or _PROPERTIES_SPLIT.search(name) or name[0] in "#!":
            raise FormatError(FileFormat.PROPERTIES, f"parameter {name!r}: not a plain key")
        if text != text.strip() or text.endswith("\\"):
            raise FormatError(FileFormat.PROPERTIES,
                              f"parameter {name!r}: edge spaces or a trailing backslash")
        lines.append(f"{name}={text}\n")
    return "".join(lines)


# --- env (dotenv) --------------------------------------------------------------------------

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r", "$": "$"}


def _parse_env(content: str, limits: Limits) -> Parameters:
    out: Parameters = {}
    for number, line in _logical_lines(content):
        body = line.removeprefix("export ").lstrip()
        name, eq, raw = body.partition("=")
        if not eq or not _ENV_NAME.fullmatch(name):
            raise FormatError(FileFormat.ENV, f"line {number}: expected NAME=value", Reason.SYNTAX)
        if name in out:
            raise FormatError(FileFormat.ENV, f"line {number}: {name} appears twice", Reason.SYNTAX)
        out[name] = _env_value(number, raw)
    return out


def _env_value(number: int, raw: str) -> str:
    if raw[:1] == "'":
        if len(raw) < 2 or not raw.endswith("'") or "'" in raw[1:-1]:
            raise FormatError(FileFormat.ENV, f"line {number}: unterminated single quote",
                              Reason.SYNTAX)
        return raw[1:-1]
    if raw[:1] != '"':
        return raw.split(" #", 1)[0].strip()
    out: list[str] = []
    i = 1
    while i < len(raw):
        char = raw[i]
        if char == '"':
            if raw[i + 1:].strip():
                raise FormatError(FileFormat.ENV, f"line {number}: text after the closing quote",
                                  Reason.SYNTAX)
            return "".join(out)
        if char == "\\":
            escaped = _ENV_ESCAPES.get(raw[i + 1:i + 2])
            if escaped is None:
                raise FormatError(FileFormat.ENV, f"line {number}: unknown escape at column {i}",
                                  Reason.SYNTAX)
            out.append(escaped)
            i += 2
            continue
        out.append(char)
        i += 1
    raise FormatError(FileFormat.ENV, f"line {number}: unterminated double quote", Reason.SYNTAX)


def _render_env(parameters: Mapping[str, Value]) -> str:
    lines = []
    for name, value in parameters.items():
        if not _ENV_NAME.fullmatch(name):
            raise FormatError(FileFormat.ENV, f"parameter {name!r} is not a variable name")
        if not isinstance(value, str):
            raise FormatError(FileFormat.ENV, f"parameter {name!r}: values are strings, "
                                              f"not {_kind(value)}")
        quoted = _env_quote(value)
        if len((quoted + "x").splitlines()) != 1:
            raise FormatError(FileFormat.ENV, f"parameter {name!r}: a value cannot hold a "
                                              "line separator other than newline")
        lines.append(f"{name}={quoted}\n")
    return "".join(lines)


def _env_quote(value: str) -> str:
    # Always double-quoted: one escaping rule covers spaces, '#', quotes and newlines.
    reverse = {v: k for k, v in _ENV_ESCAPES.items()}
    return '"' + "".join("\\" + reverse[c] if c in reverse else c for c in value) + '"'


# --- Java properties, as KubeBlocks' props-plus and props-ultra read them -------------------

# The full Java dialect (java.util.Properties#load; KubeBlocks reads these formats with
# magiconair/properties, expansion off): a line ending in an odd number of backslashes
# continues on the next (whose leading blanks are dropped); the key ends at the first
# unescaped blank, '=' or ':'; escapes \t \n \r \f \uXXXX, and a backslash before any other
# character stands for that character. A key set twice keeps its first place and its last
# value (Java's rule; Pulsar's broker.conf relies on it). props-plus writes "key = value",
# props-ultra "key=value" (KubeBlocks' two write separators); both read the same.

_JAVA_BLANK = " \t\f"
_JAVA_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_JAVA_LINES = re.compile(r"\r\n|\r|\n")


def _java_logical_lines(content: str) -> Iterator[tuple[int, str]]:
    pending: list[str] = []  # the pieces of a continued line (a list: joined once)
    start = 0
    for number, raw in enumerate(_JAVA_LINES.split(content), start=1):
        line = raw.lstrip(_JAVA_BLANK)
        if not pending and (not line or line[0] in "#!"):
            continue
        if not pending:
            start = number
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2:
            pending.append(line[:-1])
            continue
        yield start, "".join([*pending, line])
        pending = []
    if pending:
        yield start, "".join(pending)


def _java_unescape(fmt: FileFormat, number: int, text: str, stop: str) -> tuple[str, int]:
    """The unescaped text up to the first unescaped character of ``stop``, and where."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in stop:
            break
        if char != "\\":
            out.append(char)
            i += 1
            continue
        escaped = text[i + 1:i + 2]
        if escaped == "u":
            digits = text[i + 2:i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise FormatError(fmt, f"line {number}: malformed \\uXXXX escape", Reason.SYNTAX)
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_JAVA_ESCAPES.get(escaped, escaped))
        i += 2
    return "".join(out), i


def _parse_java(fmt: FileFormat) -> Callable[[str, Limits], Parameters]:
    def parse_java(content: str, limits: Limits) -> Parameters:
        out: Parameters = {}
        for number, line in _java_logical_lines(content):
            key, end = _java_unescape(fmt, number, line, _JAVA_BLANK + "=:")
            rest = line[end:].lstrip(_JAVA_BLANK)
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(_JAVA_BLANK)
            out[key], _ = _java_unescape(fmt, number, rest, "")
        return out
    return parse_java


def _java_escape(text: str, key: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\" or (key and char in "=:#! ") or (not key and index == 0 and char == " "):
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        else:
            out.append(char)
    return "".join(out)


def _render_java(fmt: FileFormat, separator: str) -> Callable[[Mapping[str, Value]], str]:
    def render_java(parameters: Mapping[str, Value]) -> str:
        lines = []
        for name, value in parameters.items():
            if not isinstance(value, str):
                raise FormatError(fmt, f"parameter {name!r}: values are strings in this "
                                       f"format, not {_kind(value)}")
            lines.append(f"{_java_escape(name, key=True)}{separator}"
                         f"{_java_escape(value, key=False)}\n")
        return "".join(lines)
    return render_java


# --- redis.conf, as KubeBlocks reads it ----------------------------------------------------

# One directive per line: whitespace-separated arguments, "double quoted" (escapes \n \r \t
# \b \a, a backslash before another character stands for it) or 'single quoted' (\' is a
# quote); lines starting with '#' are comments. A directive given once is the parameter
# named after it, its value the arguments (re-quoted where they need it). A directive given
# several times (save, client-output-buffer-limit, rename-command) is named by its first
# arguments too: as many as make the lines' names distinct, at least two
# ("client-output-buffer-limit normal": "0 0 0"), as KubeBlocks names them; lines still
# alike after all of them: the last wins.

_REDIS_SPLIT = " \r\n\t"
_REDIS_QUOTE_WHEN = frozenset("\a\b\f\n\r\t\v \"")
_REDIS_UNESCAPE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "a": "\a"}
_REDIS_ESCAPE = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
                 "\a": "\\a"}


def _redis_quoted(number: int, line: str, i: int, quote: str) -> tuple[str, int]:
    """The quoted argument starting after the quote at ``line[i - 1]``; where it ends."""
    out: list[str] = []
    while i < len(line):
        char = line[i]
        if char == quote:
            if i + 1 < len(line) and line[i + 1] not in _REDIS_SPLIT:
                raise FormatError(FileFormat.REDIS, f"line {number}: a closing quote must be "
                                                    "followed by a space", Reason.SYNTAX)
            return "".join(out), i + 1
        if char == "\\" and quote == '"':
            if i + 1 >= len(line):
                break
            out.append(_REDIS_UNESCAPE.get(line[i + 1], line[i + 1]))
            i += 2
            continue
        if char == "\\":  # single quotes: only \' is an escape, another backslash is dropped
            if line[i + 1:i + 2] == "'":
                out.append("'")
                i += 1
            i += 1
            continue
        out.append(char)
        i += 1
    raise FormatError(FileFormat.REDIS, f"line {number}: unterminated quotes", Reason.SYNTAX)


def _redis_arguments(number: int, line: str) -> list[str]:
    arguments: list[str] = []
    i = 0
    while i < len(line):
        while i < len(line) and line[i] in _REDIS_SPLIT:
            i += 1
        if i >= len(line):
            break
        token: list[str] = []
        while i < len(line) and line[i] not in _REDIS_SPLIT:
            if line[i] in "\"'":
                quoted, i = _redis_quoted(number, line, i + 1, line[i])
                token.append(quoted)
                break
            token.append(line[i])
            i += 1
        arguments.append("".join(token))
    return arguments


def _redis_encode(arguments: list[str]) -> str:
    return " ".join('"' + "".join(_REDIS_ESCAPE.get(c, c) for c in a) + '"'
                    if not a or _REDIS_QUOTE_WHEN.intersection(a) else a for a in arguments)


MAX_REDIS_NAMING = 1_000_000
"""Lines times arguments examined to name one repeated directive: real files repeat a
directive a handful of times with a few arguments; a file built to make the naming
quadratic is refused instead."""


def _redis_prefix(lines: list[list[str]]) -> int:
    """How many first arguments tell the lines apart (at least two), as KubeBlocks counts
    them: the first width at which the names differ, else the first line's length."""
    widest = len(lines[0])
    if widest * len(lines) > MAX_REDIS_NAMING:
        raise FormatError(FileFormat.REDIS, f"directive {lines[0][0][:64]!r} repeated "
                                            f"{len(lines)} times is too wide to name",
                          Reason.TOO_MANY_VALUES)
    # Each line's name so far as a small integer: one dict step per line and width.
    ids: dict[tuple[int, str], int] = {}
    names = [ids.setdefault((0, line[0]), len(ids)) for line in lines]
    for width in range(2, widest):
        names = [ids.setdefault((name, line[width - 1]), len(ids)) if len(line) >= width
                 else name for name, line in zip(names, lines, strict=True)]
        if len(set(names)) == len(names):
            return width
    return widest


def _parse_redis(content: str, limits: Limits) -> Parameters:
    directives: dict[str, list[list[str]]] = {}
    for number, raw in enumerate(content.split("\n"), start=1):
        line = raw.strip(_REDIS_SPLIT)
        if line and line[0] != "#":
            arguments = _redis_arguments(number, line)
            directives.setdefault(arguments[0], []).append(arguments)
    out: Parameters = {}
    for lines in directives.values():
        width = 1 if len(lines) == 1 else _redis_prefix(lines)
        for arguments in lines:
            out[" ".join(arguments[:width])] = _redis_encode(arguments[width:])
    return out


def _render_redis(parameters: Mapping[str, Value]) -> str:
    lines = []
    for name, value in parameters.items():
        if not isinstance(value, str):
            raise FormatError(FileFormat.REDIS, f"parameter {name!r}: values are strings in "
                                                f"this format, not {_kind(value)}")
        lines.append(f"{name} {value}".rstrip(" ") + "\n" if value else f"{name}\n")
    text = "".join(lines)
    try:
        same = _parse_redis(text, LIMITS) == dict(parameters)
    except FormatError:
        same = False
    if not same:  # a name that is not plain words, a value not in its written form
        raise FormatError(FileFormat.REDIS, "these parameters cannot be written so that they "
                                            "read back the same (names are directive words, "
                                            "values arguments as redis.conf writes them)")
    return text


# --- xml, as KubeBlocks reads it (mxj's map of the document) ------------------------------

# The root element and its descendants become dotted paths (clickhouse.max_connections); an
# element's attributes are its "-name" keys and its text, when it also has children or
# attributes, its "#text" key (mxj's names). Values are strings (text with its edge blanks
# stripped). A document type declaration is refused before parsing (no entity can be
# declared, so none can expand or reach out), and so is what a flat map cannot hold: an
# element repeated under one parent (a list), text between child elements, a namespace.

_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _parse_xml(content: str, limits: Limits) -> Parameters:
    if "<!DOCTYPE" in content or "<!ENTITY" in content:
        raise FormatError(FileFormat.XML, "a document type declaration (DTD) is not accepted",
                          Reason.SYNTAX)
    try:
        root = ElementTree.fromstring(content)
    except ElementTree.ParseError as err:
        line, column = err.position
        raise FormatError(FileFormat.XML, f"line {line}, column {column}: not well-formed",
                          Reason.SYNTAX) from None
    tree = {_xml_tag(root.tag): _xml_node(root, root.tag, 1, limits)}
    return _flatten(FileFormat.XML, tree)


def _xml_tag(tag: object) -> str:
    if not isinstance(tag, str) or "{" in tag:
        raise FormatError(FileFormat.XML, f"element {str(tag)[:64]!r}: namespaces are not "
                                          "parameter names")
    return tag


def _xml_node(element: ElementTree.Element, path: str, depth: int, limits: Limits) -> object:
    if depth > limits.max_depth:
        raise FormatError(FileFormat.XML, f"nested deeper than {limits.max_depth} levels",
                          Reason.NESTED_TOO_DEEP)
    text = (element.text or "").strip()
    if not len(element) and not element.attrib:
        return text
    node: dict[str, object] = {f"-{name}": value for name, value in element.attrib.items()}
    if text:
        node["#text"] = text
    for child in element:
        tag = _xml_tag(child.tag)
        if tag in node:
            raise FormatError(FileFormat.XML, f"element {path}.{tag} repeats (a list is not "
                                              "a flat parameter map)")
        if (child.tail or "").strip():
            raise FormatError(FileFormat.XML, f"element {path}: text between child elements")
        node[tag] = _xml_node(child, f"{path}.{tag}", depth + 1, limits)
    return node


def _render_xml(parameters: Mapping[str, Value]) -> str:
    tree = _unflatten(FileFormat.XML, parameters)
    if len(tree) != 1:
        raise FormatError(FileFormat.XML, "the parameters must share one root element")
    [(tag, value)] = tree.items()
    root = _xml_element(tag, value)
    text = ElementTree.tostring(root, encoding="unicode") + "\n"
    try:
        back = _parse_xml(text, LIMITS)
    except FormatError:
        back = {}
    if back.keys() != parameters.keys() or not all(same_value(back[k], v)
                                                   for k, v in parameters.items()):
        raise FormatError(FileFormat.XML, "these parameters cannot be written so that they "
                                          "read back the same (names are element names, "
                                          "values text without edge blanks)")
    return text


def _xml_element(tag: str, value: object) -> ElementTree.Element:
    if not _XML_NAME.fullmatch(tag):
        raise FormatError(FileFormat.XML, f"parameter segment {tag[:64]!r} is not an "
                                          "element name")
    element = ElementTree.Element(tag)
    if not isinstance(value, dict):
        element.text = _xml_text(tag, value)
        return element
    for key, child in value.items():
        if key.startswith("-") and _XML_NAME.fullmatch(key[1:]):
            element.set(key[1:], _xml_text(key, child))
        elif key == "#text":
            element.text = _xml_text(key, child)
        else:
            element.append(_xml_element(key, child))
    return element


def _xml_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise FormatError(FileFormat.XML, f"parameter {name!r}: values are strings in this "
                                          f"format, not {_kind(value)}")
    return value


_PARSERS: dict[FileFormat, Callable[[str, Limits], Parameters]] = {
    FileFormat.INI: _parse_ini, FileFormat.YAML: _parse_yaml, FileFormat.JSON: _parse_json,
    FileFormat.PROPERTIES: _parse_properties, FileFormat.TOML: _parse_toml,
    FileFormat.ENV: _parse_env, FileFormat.REDIS: _parse_redis,
    FileFormat.PROPS_PLUS: _parse_java(FileFormat.PROPS_PLUS),
    FileFormat.PROPS_ULTRA: _parse_java(FileFormat.PROPS_ULTRA), FileFormat.XML: _parse_xml,
}
_RENDERERS = {
    FileFormat.INI: _render_ini, FileFormat.YAML: _render_yaml, FileFormat.JSON: _render_json,
    FileFormat.PROPERTIES: _render_properties, FileFormat.TOML: _render_toml,
    FileFormat.ENV: _render_env, FileFormat.REDIS: _render_redis,
    FileFormat.PROPS_PLUS: _render_java(FileFormat.PROPS_PLUS, " = "),
    FileFormat.PROPS_ULTRA: _render_java(FileFormat.PROPS_ULTRA, "="),
    FileFormat.XML: _render_xml,
}
