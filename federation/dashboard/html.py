"""HTML built so that nothing unescaped can get in.

Every string handed to :func:`el` as a child or an attribute value is escaped unless it
is already :class:`Html` (markup this module built). Object names, messages, labels and
every other value from the hub are tenant-controlled: an object named ``<script>``
renders as the text ``<script>``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable


class Html(str):
    """Markup that is safe to send as it is (built here from escaped parts)."""

    __slots__ = ()

Child = "Html | str | int | float | None | Iterable[Html | str | int | float | None]"

def text(value: object) -> Html:
    """``value`` as text: ``<``, ``>``, ``&`` and both quotes escaped."""
    return value if isinstance(value, Html) else Html(html.escape(str(value), quote=True))

def join(parts: Iterable[object]) -> Html:
    return Html("".join(_child(part) for part in parts))

def _child(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, (int, float)):
        return text(value)
    if isinstance(value, Iterable):
        return join(value)
    return text(value)

def _attribute(name: str, value: object) -> str:
    key = name.rstrip("_").replace("_", "-")
    if value is True:
        return f" {key}"
    return f' {key}="{text(value)}"'

VOID = frozenset({"input", "meta", "link", "br", "hr", "img"})

def el(tag: str, *children: object, **attributes: object) -> Html:
    """``<tag attributes>children</tag>``; ``class_`` is ``class``, ``aria_label`` is
    ``aria-label``; an attribute that is None or False is left out, True is bare."""
    attrs = "".join(_attribute(name, value) for name, value in attributes.items()
                    if value is not None and value is not False)
    if tag in VOID:
        return Html(f"<{tag}{attrs}>")
    return Html(f"<{tag}{attrs}>{join(children)}</{tag}>")
