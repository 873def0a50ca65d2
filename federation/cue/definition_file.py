"""KubeVela's CUE definition file (the format of ``vela def`` and of addons' ``.cue``
definitions), split into its metadata and its template text.

Such a file holds one metadata field, named after the definition (``helm: {type:
"component", attributes: {...}, description: ...}``), and one ``template: {...}`` field,
after any imports. ``vela addon enable`` and ``vela def apply`` turn it into a definition
object (vela-core ``pkg/definition``, ``FromCUEString``): the metadata becomes the object's
name, kind, annotations, labels and spec, and the template's body, with the file's
imports before it, becomes ``spec.schematic.cue.template`` as text. This module does the
CUE half of that, pure as the rest of the package: the metadata evaluated to JSON, the
template body cut out of the source as written (comments, ``// +patchKey`` directives and
all, which evaluation of the definition needs later). Building the object is the
caller's (``federation.applications.definition_files``).

Stricter than vela-core where it would drop something silently: a declaration other than
a field at the top level, a second ``template``, a template not written as ``{...}`` are
each refused by name; a file whose CUE does not parse, or imports a package this
evaluator lacks, is refused as :func:`~federation.cue.parse` refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from federation.cue import syntax as s
from federation.cue.errors import Budget, CueError
from federation.cue.exporting import DEFAULT_BUDGET, Template, export, parse
from federation.cue.lexer import Token, tokenize

TEMPLATE = "template"


@dataclass(frozen=True)
class DefinitionFile:
    name: str
    """The definition's name: the label of the metadata field."""
    metadata: dict[str, Any]
    """The metadata field's value as JSON (``type``, ``attributes``, ``description``...)."""
    template: str
    """The template as KubeVela stores it: the file's imports, then the body of
    ``template: {...}`` as written (dedented)."""


def split_definition_file(source: str, *, name: str = "definition",
                          budget: Budget = DEFAULT_BUDGET) -> DefinitionFile:
    """The parts of a definition file (:class:`CueError`, one line, on anything else)."""
    parsed = parse(source, name=name, budget=budget)
    metadata: list[s.Field] = []
    template: s.Field | None = None
    for decl in parsed.file.body.decls:
        label = decl.label.name if isinstance(decl, s.Field) else None
        if not isinstance(decl, s.Field) or label is None or decl.constraint:
            raise CueError(f"{name}:{decl.pos}: only fields at the top level of a definition "
                           "file (its metadata and template)")
        if label != TEMPLATE:
            metadata.append(decl)
        elif template is not None:
            raise CueError(f"{name}:{decl.pos}: template: written twice")
        else:
            template = decl
    if not metadata:
        raise CueError(f"{name}: no metadata field (NAME: {{type: ..., ...}})")
    if len(metadata) > 1:
        raise CueError(f"{name}:{metadata[1].pos}: a second metadata field "
                       f"({s.display(metadata[1].label.name or '')!r}): one definition a file")
    if template is None:
        raise CueError(f"{name}: no template field (template: {{...}})")
    field = metadata[0]
    label = s.display(field.label.name or "")
    _check_status_strings(field, label, name)
    only = Template(name, s.File(field.pos, parsed.imports, s.StructLit(field.pos, (field,))),
                    parsed.imports)
    values = export(only, {}, [field.label.name or ""], budget).values
    meta = values.get(field.label.name or "")
    if not isinstance(meta, dict):
        raise CueError(f"{name}:{field.pos}: {label}: the metadata must be a struct")
    body = _struct_text(source, name, template)
    return DefinitionFile(label, meta, _imports_text(parsed.imports) + body)


def _check_status_strings(field: s.Field, label: str, name: str) -> None:
    """vela-core also takes ``attributes.status.healthPolicy`` (``customStatus``,
    ``details``) written as CUE and stores it as text; here only the text form is read."""
    for key in ("healthPolicy", "customStatus", "details"):
        found = _field_at(field.value, ("attributes", "status", key))
        if found is not None and not isinstance(found.value, s.Lit | s.Interp):
            raise CueError(f"{name}:{found.pos}: {label}.attributes.status.{key}: only a "
                           "string is supported (write the CUE inside #\"\"\" ... \"\"\"#)")


def _field_at(node: s.Node, path: tuple[str, ...]) -> s.Field | None:
    for decl in node.decls if isinstance(node, s.StructLit) else ():
        if isinstance(decl, s.Field) and decl.label.name == path[0]:
            if len(path) == 1:
                return decl
            found = _field_at(decl.value, path[1:])
            if found is not None:
                return found
    return None


def _struct_text(source: str, name: str, field: s.Field) -> str:
    """The source between the braces of ``field``'s ``{...}`` value."""
    tokens = tokenize(source, name)
    start = next((i for i, t in enumerate(tokens) if t.pos == field.value.pos), None)
    if not isinstance(field.value, s.StructLit) or start is None or \
            not _is(tokens[start], "{"):
        raise CueError(f"{name}:{field.pos}: template: must be written as a struct {{...}}")
    depth = 0
    for end in range(start, len(tokens)):
        token = tokens[end]
        depth += _is(token, "{") - _is(token, "}")
        if depth == 0:
            break
    lines = source.split("\n")
    text = _cut(lines, tokens[start], tokens[end])
    return _dedent(text.strip("\n").rstrip()) + "\n"


def _dedent(text: str) -> str:
    """Lines less the indentation all non-blank ones share; a line without it (a blank one)
    is kept as it is, so a multi-line string keeps its content."""
    lines = text.split("\n")
    indents = [line[:len(line) - len(line.lstrip(" \t"))] for line in lines if line.strip()]
    prefix = indents[0] if indents else ""
    for indent in indents[1:]:
        while not indent.startswith(prefix):
            prefix = prefix[:-1]
    return "\n".join(line[len(prefix):] if line.startswith(prefix) else line
                     for line in lines)


def _is(token: Token, value: str) -> bool:
    return token.kind == "op" and token.value == value


def _cut(lines: list[str], opening: Token, closing: Token) -> str:
    """The text strictly between two tokens (1-based line and column each)."""
    if opening.line == closing.line:
        return lines[opening.line - 1][opening.col:closing.col - 1]
    first = lines[opening.line - 1][opening.col:]
    middle = lines[opening.line:closing.line - 1]
    last = lines[closing.line - 1][:closing.col - 1]
    return "\n".join([first, *middle, last])


def _imports_text(imports: tuple[tuple[str, str], ...]) -> str:
    if not imports:
        return ""
    specs = [f'\t"{path}"' if path.rsplit("/", 1)[-1] == local else f'\t{local} "{path}"'
             for local, path in imports]
    return "import (\n" + "\n".join(specs) + "\n)\n\n"
