"""A small renderer of the Helm template subset KubeBlocks' addon charts use for their
ConfigConstraints and ParametersDefinitions (bench/kubeblocks_corpus.py). Not Helm: no
``define``, no sprig beyond the functions below; anything else raises :class:`Unsupported`
naming it, so the corpus counts what could not be rendered and why.

Actions: text, ``{{- ... -}}`` trimming, comments, ``if``/``else if``/``else``, ``range``
(over a list or map, setting ``.``, or ``$v``/``$i, $v :=``), ``with``, ``$x := ...``/
``$x = ...``, pipelines. Values: ``.``, ``$``, fields (``.Values.image.tag``,
``$v.major``), strings, numbers, ``(...)``.
Functions: ``.Files.Get``, ``fromYaml``, ``hasKey``, ``get``, ``printf``, ``default``,
``quote``, ``nindent``, ``indent``, ``dict``, ``list``, ``regexQuoteMeta``, ``eq``, ``ne``,
``or``, ``and``, ``not``,
``include``/``template`` (a placeholder: named templates are labels and names, never a
parameter list), ``replace``, ``toYaml``, ``trim``, ``lower``, ``upper``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import yaml


class Unsupported(Exception):
    """A construct this renderer does not implement (its message names it)."""


_ACTION = re.compile(r"\{\{(-?)\s*(/\*.*?\*/|.*?)\s*(-?)\}\}", re.S)


def _tokens(source: str) -> list[tuple[str, str]]:
    """``("text", ...)`` and ``("action", ...)`` pieces, with ``{{-``/``-}}`` trimming."""
    pieces: list[tuple[str, str]] = []
    position = 0
    trim_next = False
    for match in _ACTION.finditer(source):
        text = source[position:match.start()]
        if trim_next:
            text = text.lstrip()
        if match.group(1):
            text = text.rstrip()
        pieces.append(("text", text))
        body = match.group(2)
        if not body.startswith("/*"):
            pieces.append(("action", body))
        trim_next = bool(match.group(3))
        position = match.end()
    tail = source[position:]
    pieces.append(("text", tail.lstrip() if trim_next else tail))
    return pieces


Node = tuple[Any, ...]


def _parse(tokens: list[tuple[str, str]], index: int = 0, stop: tuple[str, ...] = ()
           ) -> tuple[list[Node], int, str]:
    nodes: list[Node] = []
    while index < len(tokens):
        kind, body = tokens[index]
        index += 1
        if kind == "text":
            nodes.append(("text", body))
            continue
        word = body.split(" ", 1)[0]
        if word in stop or (word == "else" and "else" in stop):
            return nodes, index, body
        if word in ("if", "range", "with"):
            node, index = _block(word, body[len(word):].strip(), tokens, index)
            nodes.append(node)
        elif word in ("define", "block"):
            raise Unsupported(f"{{{{ {word} }}}}")
        else:
            nodes.append(("expr", body))
    if stop:
        raise Unsupported("a block without {{ end }}")
    return nodes, index, ""


def _block(word: str, condition: str, tokens: list[tuple[str, str]], index: int
           ) -> tuple[Node, int]:
    body, index, ended = _parse(tokens, index, ("end", "else"))
    otherwise: list[Node] = []
    if ended.startswith("else if "):
        node, index = _block("if", ended[len("else if "):].strip(), tokens, index)
        otherwise = [node]
    elif ended.startswith("else"):
        otherwise, index, _ = _parse(tokens, index, ("end",))
    return (word, condition, body, otherwise), index


class Renderer:
    def __init__(self, files: Callable[[str], str | None], values: Mapping[str, Any],
                 chart: Mapping[str, Any], namespace: str = "default") -> None:
        self.files = files
        self.root = {"Values": dict(values), "Chart": {"Version": chart.get("version", ""),
                                                       "Name": chart.get("name", "")},
                     "Release": {"Namespace": namespace, "Name": "release"},
                     "Files": {}}
        self.variables: dict[str, Any] = {}

    def render(self, source: str) -> str:
        nodes, _, _ = _parse(_tokens(source))
        self.variables = {"$": self.root}
        return self._nodes(nodes, self.root)

    def _nodes(self, nodes: list[Node], dot: Any) -> str:
        return "".join(self._node(node, dot) for node in nodes)

    def _node(self, node: Node, dot: Any) -> str:
        kind = node[0]
        if kind == "text":
            return str(node[1])
        if kind == "expr":
            value = self._statement(node[1], dot)
            return "" if value is None else _text(value)
        _, condition, body, otherwise = node
        bound = re.fullmatch(r"(?:(\$\w+)\s*,\s*)?(\$\w+)\s*:=\s*(.*)", condition, re.S)
        if bound and kind == "range":
            return self._range_bound(bound.group(1), bound.group(2),
                                     self._pipeline(bound.group(3), dot), body, otherwise, dot)
        value = self._pipeline(condition, dot)
        if kind == "if":
            return self._nodes(body if _truth(value) else otherwise, dot)
        if kind == "with":
            return self._nodes(body, value) if _truth(value) else self._nodes(otherwise, dot)
        items = list(value.values()) if isinstance(value, Mapping) else list(value or [])
        if not items:
            return self._nodes(otherwise, dot)
        return "".join(self._nodes(body, item) for item in items)

    def _range_bound(self, index: str | None, name: str, value: Any, body: list[Node],
                     otherwise: list[Node], dot: Any) -> str:
        pairs = list(value.items()) if isinstance(value, Mapping) \
            else list(enumerate(value or []))
        if not pairs:
            return self._nodes(otherwise, dot)
        out = []
        for key, item in pairs:
            if index is not None:
                self.variables[index] = key
            self.variables[name] = item
            out.append(self._nodes(body, item))
        return "".join(out)

    def _statement(self, body: str, dot: Any) -> Any:
        assign = re.fullmatch(r"(\$\w+)\s*:?=\s*(.*)", body, re.S)
        if assign:
            self.variables[assign.group(1)] = self._pipeline(assign.group(2), dot)
            return None
        return self._pipeline(body, dot)

    def _pipeline(self, text: str, dot: Any) -> Any:
        value: Any = _NOTHING
        for stage in _split(text, "|"):
            words = _words(stage)
            value = self._call(words, dot, value)
        return value

    def _call(self, words: list[str], dot: Any, piped: Any) -> Any:
        head, args = words[0], words[1:]
        if head == ".Files.Get" or head == "$.Files.Get":
            path = self._value(args[0], dot)
            return self.files(str(path)) or ""
        function = _FUNCTIONS.get(head)
        if function is None:
            if args or head.isidentifier():
                raise Unsupported(f"function {head}")
            return self._value(head, dot)
        values = [self._value(a, dot) for a in args]
        if piped is not _NOTHING:
            values.append(piped)
        return function(*values)

    def _value(self, word: str, dot: Any) -> Any:
        if word.startswith("(") and word.endswith(")"):
            return self._pipeline(word[1:-1], dot)
        if word.startswith('"'):
            return str(shlex.split(word)[0]) if word != '""' else ""
        if re.fullmatch(r"-?\d+", word):
            return int(word)
        if word in ("true", "false"):
            return word == "true"
        if word == ".":
            return dot
        if word.startswith("$"):
            name, _, path = word.partition(".")
            if name not in self.variables:
                raise Unsupported(f"variable {name}")
            return _field(self.variables[name], path)
        if word.startswith("."):
            return _field(dot, word[1:])
        raise Unsupported(f"value {word}")


_NOTHING = object()


def _field(value: Any, path: str) -> Any:
    for part in filter(None, path.split(".")):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _split(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside quotes and parentheses."""
    parts, depth, quoted, current = [], 0, False, ""
    for char in text:
        if char == '"' and not current.endswith("\\"):
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
        if char == separator and depth == 0 and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return parts


def _words(stage: str) -> list[str]:
    words = [w for w in _split(stage, " ") if w]
    if not words:
        raise Unsupported("an empty pipeline stage")
    return words


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return yaml.safe_dump(value, default_flow_style=False).rstrip("\n")
    return str(value)


def _truth(value: Any) -> bool:
    return bool(value) and value is not _NOTHING


def _included(name: str) -> str:
    """A named template's placeholder: a mapping entry for a labels/annotations helper
    (its output is a block of ``key: value`` lines), else a plain name."""
    if name.lower().endswith(("labels", "annotations")):
        return f"helm-lite/{name}: included"
    return f"included-{name}"


def _printf(template: str, *args: Any) -> str:
    return re.sub(r"%[sdv]", "{}", template.replace("{", "{{").replace("}", "}}")).format(
        *[_text(a) for a in args])


def _indent(spaces: int, text: Any) -> str:
    return "\n".join(" " * spaces + line for line in _text(text).split("\n"))


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "fromYaml": lambda text: yaml.safe_load(text) or {},
    "toYaml": lambda value: _text(value),
    "hasKey": lambda mapping, key: isinstance(mapping, Mapping) and key in mapping,
    "get": lambda mapping, key: mapping.get(key, "") if isinstance(mapping, Mapping) else "",
    "printf": _printf,
    "default": lambda fallback, value=None: value if _truth(value) else fallback,
    "quote": lambda value: json.dumps(_text(value), ensure_ascii=False),  # Go's %q, near
    "list": lambda *values: list(values),
    "regexQuoteMeta": lambda text: re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", _text(text)),
    "nindent": lambda spaces, text: "\n" + _indent(spaces, text),
    "indent": _indent,
    "dict": lambda *pairs: {str(pairs[i]): pairs[i + 1] for i in range(0, len(pairs), 2)},
    "eq": lambda a, *others: any(a == o for o in others),
    "ne": lambda a, b: a != b,
    "or": lambda *values: next((v for v in values if _truth(v)), values[-1]),
    "and": lambda *values: next((v for v in values if not _truth(v)), values[-1]),
    "not": lambda value: not _truth(value),
    "include": lambda name, *_: _included(name),
    "template": lambda name, *_: _included(name),
    "replace": lambda old, new, text: _text(text).replace(old, new),
    "trim": lambda text: _text(text).strip(),
    "lower": lambda text: _text(text).lower(),
    "upper": lambda text: _text(text).upper(),
}
