"""The HTML builder escapes whatever it is given, in text and in attributes."""

from __future__ import annotations

from federation.dashboard import pages
from federation.dashboard.command import loopback
from federation.dashboard.html import Html, el, join, text


def test_text_and_attributes_are_escaped() -> None:
    hostile = '"><img src=x onerror=alert(1)>'
    built = el("a", hostile, href=hostile, title=hostile)
    assert "<img" not in built
    assert built.count("&quot;&gt;&lt;img") == 3


def test_markup_built_here_is_kept_and_nested_lists_are_joined() -> None:
    assert el("ul", [el("li", "a"), [el("li", "<b>")], None, 3]) == \
        "<ul><li>a</li><li>&lt;b&gt;</li>3</ul>"
    assert join(["<", Html("<br>")]) == "&lt;<br>"
    assert text(Html("<i>")) == "<i>"


def test_attribute_names_and_flags() -> None:
    assert el("button", "x", disabled=True, aria_label="y", class_="z", hidden=False,
              title=None) == '<button disabled aria-label="y" class="z">x</button>'
    assert el("input", name="q") == '<input name="q">'


def test_links_keep_each_name_one_part() -> None:
    assert pages.href("application", "shop", "a/b?c") == "/application/shop/a%2Fb%3Fc"
    assert pages.href("workload", "", "x", fail="m1", other=None) == "/workload/_/x?fail=m1"


def test_only_loopback_is_loopback() -> None:
    assert loopback("127.0.0.1") and loopback("::1") and loopback("localhost")
    assert not loopback("0.0.0.0") and not loopback("10.0.0.1") and not loopback("example.com")
