"""Untrusted bytes to YAML and JSON data, within limits that keep parsing cheap and flat.

``fedctl plan`` reads files anyone may hand it, so every step from bytes to
Python data is bounded before it runs, and every failure is a
:class:`TextError` with a one-line reason (never a traceback):

- size: at most :attr:`Limits.max_bytes` per file, checked before decoding;
- encoding: UTF-8 only (a UTF-8 byte order mark is allowed); UTF-16/32, NUL
  bytes and invalid UTF-8 are refused with the offset of the first bad byte;
- shape: at most :attr:`Limits.max_depth` levels of nesting, at most
  :attr:`Limits.max_nodes` values counted *after* expanding YAML aliases (so a
  "billion laughs" document of nested anchors is refused, not expanded), and
  at most :attr:`Limits.max_documents` YAML documents per file; recursive
  aliases are refused.

YAML is checked in two passes. The first walks the parser's event stream (an
iterative state machine in libyaml and in PyYAML alike, so depth cannot
exhaust any stack) and counts depth, values and documents, stopping at the
first limit crossed. Only then does the composer and constructor (both
recursive) build the documents, with libyaml's ``CSafeLoader`` when PyYAML was
built with it, else the pure-Python ``SafeLoader``. JSON is parsed by the
standard library, whose recursion guard is mapped to the depth error, and then
walked iteratively for the same depth and size limits. Errors the constructors
raise as plain exceptions (an impossible date such as ``2001-02-30``, an
integer of more than 4300 digits) are reported like syntax errors.
"""

from __future__ import annotations

import codecs
import enum
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from federation.untrusted.text import unquoted

#: libyaml's loader when available: it parses several times faster.
LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = (
    yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader
)
_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_COLLECTION_STARTS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_COLLECTION_ENDS = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


@dataclass(frozen=True)
class Limits:
    """Bounds on one input file; each failure names the limit it crossed."""

    max_bytes: int = 4 * 2**20
    """4 MiB: the API server takes at most 3 MiB per request, so one Kubernetes object
    is smaller; 4 MiB holds thousands of policies, workloads or clusters, and the
    largest file the other limits let through still parses in about a second."""
    max_depth: int = 100
    """Kubernetes objects nest about 10 levels deep and CRD schemas rarely 40; 100
    keeps the recursive YAML constructor and pydantic far from Python's stack limit
    (about 1,000 frames), which a 1,000-level document used to exhaust."""
    max_nodes: int = 100_000
    """Values (mappings, sequences, scalars) per file after expanding aliases: a
    cluster with labels and taints is about 20, so this holds 5,000 clusters;
    PyYAML builds 100,000 values (mappings being the slowest) in about a second,
    while a 'billion laughs' document asks for 10**9."""
    max_documents: int = 10_000
    """YAML documents per file: more than any hand-written manifest set, and it bounds
    the per-document work (empty documents included) before any is built."""


LIMITS = Limits()


class Reason(enum.Enum):
    """Why text was refused: the stable class callers and tests rely on.

    Each value is the phrase every message of its class contains, whichever layer found the
    problem (our checks or the parser library's own guards, which change between releases:
    PyYAML 6.0.4's libyaml refuses deep flow nesting itself, and that is mapped to
    :attr:`DEPTH` here rather than passed on in the library's words)."""

    SIZE = "larger than the limit"
    ENCODING = "not readable text"
    DEPTH = "nested deeper than"
    VALUES = "values after expanding aliases"
    DOCUMENTS = "YAML documents"
    SYNTAX = "malformed"


class TextError(ValueError):
    """The bytes or text cannot be read as data: a one-line reason, without the file name."""

    def __init__(self, reason: Reason, message: str) -> None:
        self.reason = reason
        super().__init__(message)


def decode(data: bytes, limits: Limits = LIMITS) -> str:
    """``data`` as text: within the size limit, UTF-8 (BOM dropped), no NUL bytes."""
    if len(data) > limits.max_bytes:
        raise TextError(Reason.SIZE, f"larger than the limit of {limits.max_bytes} bytes")
    if data.startswith(_BOMS):
        raise TextError(Reason.ENCODING, "not readable text: UTF-16 or UTF-32 text (byte order "
                        "mark found); save it as UTF-8")
    nul = data.find(b"\0")
    if nul >= 0:
        raise TextError(Reason.ENCODING, f"not readable text: NUL byte at offset {nul} (a binary "
                        "file, or UTF-16 without a byte order mark)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextError(Reason.ENCODING, f"not readable text: not UTF-8, byte "
                        f"0x{data[error.start]:02x} at offset {error.start}") from None
    return text.removeprefix("\ufeff")


# -- YAML -----------------------------------------------------------------------------------


def yaml_documents(text: str, limits: Limits = LIMITS, *, quote: bool = True) -> list[Any]:
    """Every non-empty YAML document of ``text``, after :func:`check_yaml` passed.

    ``quote=False`` for text that may be secret (a Secret-backed config file, a kubeconfig):
    syntax errors then keep the parser's words but none of what they quote of the text
    (:func:`~federation.untrusted.text.unquoted`), since those words quote the
    text (``found undefined alias 'S3cretTokenValue42'``)."""
    try:
        check_yaml(text, limits)
        return [doc for doc in yaml.load_all(text, Loader=LOADER) if doc is not None]
    except TextError:
        raise
    except yaml.YAMLError as error:
        raise _yaml_error(error, limits, quote) from None
    except RecursionError:  # defence in depth: check_yaml bounds the depth first
        raise TextError(Reason.DEPTH, f"nested deeper than {limits.max_depth} levels") from None
    except (ValueError, OverflowError) as error:  # e.g. 2001-02-30, a 5000-digit integer
        raise TextError(Reason.SYNTAX,
                        f"malformed YAML: {_shown(str(error), quote)}") from None


def _yaml_error(error: yaml.YAMLError, limits: Limits, quote: bool) -> TextError:
    """The parser's error in our classes: libyaml's own nesting guard is a depth error."""
    problem = str(getattr(error, "problem", None) or error)
    if "nesting depth" in problem:  # libyaml >= PyYAML 6.0.4's guard (about 1,000 levels)
        return TextError(Reason.DEPTH, f"nested deeper than {limits.max_depth} levels")
    if isinstance(error, yaml.reader.ReaderError):
        where, problem = f"position {error.position}", error.reason
    else:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = _shown(problem, quote)
    return TextError(Reason.SYNTAX, f"malformed YAML: {where}: {problem}" if where
                     else f"malformed YAML: {problem}")


def _shown(message: str, quote: bool) -> str:
    """A parser's words as shown: whole, or without what they quote of the text."""
    return message if quote else unquoted(message)


@dataclass
class _Open:
    """A collection being parsed: its anchor, values so far and height below it."""

    anchor: str | None
    nodes: int = 1
    height: int = 0


class _Shape:
    """Running depth, value and document counts over a YAML event stream."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.nodes = 0
        self.documents = 0
        self.stack: list[_Open] = []
        #: Anchor -> (values, height) of the node it names, in the current document.
        self.anchors: dict[str, tuple[int, int]] = {}

    def document(self, line: int) -> None:
        self.documents += 1
        self.anchors.clear()
        if self.documents > self.limits.max_documents:
            raise TextError(Reason.DOCUMENTS,
                            f"more than {self.limits.max_documents} YAML documents (line {line})")

    def open(self, anchor: str | None, line: int) -> None:
        self.stack.append(_Open(anchor))
        self._count(1, len(self.stack), line)

    def close(self) -> None:
        done = self.stack.pop()
        self._finish(done.anchor, done.nodes, done.height + 1)

    def scalar(self, anchor: str | None, line: int) -> None:
        self._count(1, len(self.stack), line)
        self._finish(anchor, 1, 0)

    def alias(self, anchor: str, line: int) -> None:
        if any(o.anchor == anchor for o in self.stack):
            raise TextError(Reason.VALUES, "recursive alias: infinite values after expanding "
                            f"aliases (line {line})")
        nodes, height = self.anchors.get(anchor, (1, 0))  # undefined: the composer says so
        self._count(nodes, len(self.stack) + height, line)
        self._finish(None, nodes, height)

    def _count(self, nodes: int, depth: int, line: int) -> None:
        self.nodes += nodes
        if depth > self.limits.max_depth:
            raise TextError(Reason.DEPTH,
                            f"nested deeper than {self.limits.max_depth} levels (line {line})")
        if self.nodes > self.limits.max_nodes:
            raise TextError(Reason.VALUES, f"more than {self.limits.max_nodes} values after "
                            f"expanding aliases (line {line})")

    def _finish(self, anchor: str | None, nodes: int, height: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (nodes, height)
        if self.stack:
            parent = self.stack[-1]
            parent.nodes += nodes
            parent.height = max(parent.height, height)


def check_yaml(text: str, limits: Limits = LIMITS) -> None:
    """Raise :class:`TextError` when ``text``'s YAML crosses a limit (events only, no nodes)."""
    shape = _Shape(limits)
    for event in yaml.parse(text, Loader=LOADER):
        line = event.start_mark.line + 1 if event.start_mark else 0
        if isinstance(event, yaml.DocumentStartEvent):
            shape.document(line)
        elif isinstance(event, _COLLECTION_STARTS):
            shape.open(event.anchor, line)
        elif isinstance(event, _COLLECTION_ENDS):
            shape.close()
        elif isinstance(event, yaml.ScalarEvent):
            shape.scalar(event.anchor, line)
        elif isinstance(event, yaml.AliasEvent):
            shape.alias(str(event.anchor), line)


# -- JSON -----------------------------------------------------------------------------------


def json_document(text: str, limits: Limits = LIMITS, *, quote: bool = True) -> Any:
    """The JSON value of ``text``, within the depth and size limits (``quote``: as for
    :func:`yaml_documents`; the standard library's messages never quote the text, but a
    too-long integer's does say how long)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TextError(Reason.SYNTAX, f"malformed JSON: line {error.lineno}, column "
                        f"{error.colno}: {error.msg}") from None
    except RecursionError:
        raise TextError(Reason.DEPTH, f"nested deeper than {limits.max_depth} levels") from None
    except ValueError as error:  # an integer of more than 4300 digits
        raise TextError(Reason.SYNTAX, f"malformed JSON: {_shown(str(error), quote)}"
                        ) from None
    for nodes, depth in enumerate(_depths(data), start=1):
        if depth > limits.max_depth:
            raise TextError(Reason.DEPTH, f"nested deeper than {limits.max_depth} levels")
        if nodes > limits.max_nodes:
            raise TextError(Reason.VALUES,
                            f"more than {limits.max_nodes} values after expanding aliases")
    return data


def _depths(data: Any) -> Iterator[int]:
    """The collection depth of every value of a JSON tree, without recursion."""
    pending = [(data, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            depth += 1
            pending.extend((item, depth) for item in value)
        yield depth
