"""Bytes to YAML/JSON data within limits: each limit holds exactly at its boundary."""

from __future__ import annotations

import pytest

from federation.placement import loader
from federation.untrusted import documents
from federation.untrusted.documents import Limits, TextError

#: Which reason class each of our own phrases belongs to (the phrase is ours, not a library's).
CLASSES = {"larger than": documents.Reason.SIZE, "deeper than": documents.Reason.DEPTH,
           "more than 1 YAML": documents.Reason.DOCUMENTS, "values": documents.Reason.VALUES,
           "recursive alias": documents.Reason.VALUES, "malformed": documents.Reason.SYNTAX,
           "UTF": documents.Reason.ENCODING, "NUL": documents.Reason.ENCODING,
           "byte 0x": documents.Reason.ENCODING, "position 3": documents.Reason.SYNTAX,
           "undefined alias": documents.Reason.SYNTAX}


def refused(call: object, *args: object, match: str) -> None:
    """A one-line TextError matching ``match``, of the reason class ``match`` belongs to."""
    with pytest.raises(TextError, match=match) as caught:
        call(*args)  # type: ignore[operator]
    assert "\n" not in str(caught.value)
    expected = [reason for phrase, reason in CLASSES.items() if phrase in match]
    assert expected and caught.value.reason is expected[0], (match, caught.value.reason)
    assert caught.value.reason.value in str(caught.value)


# -- decoding -------------------------------------------------------------------------------


def test_size_limit_is_inclusive() -> None:
    """max_bytes bytes decode; one more is refused before decoding."""
    limits = Limits(max_bytes=8)
    assert documents.decode(b"a: 12345", limits) == "a: 12345"
    refused(documents.decode, b"a: 123456", limits, match="larger than the limit of 8 bytes")


def test_utf8_bom_is_dropped() -> None:
    assert documents.decode(b"\xef\xbb\xbfa: 1") == "a: 1"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("a: 1".encode("utf-16"), "UTF-16 or UTF-32"),
        ("a: 1".encode("utf-32"), "UTF-16 or UTF-32"),
        ("a: 1".encode("utf-16-be"), "NUL byte at offset 0"),
        (b"ab\0", "NUL byte at offset 2"),
        (b"ok: \xe9t\xe9", "byte 0xe9 at offset 4"),
        (b"\xc3", "byte 0xc3 at offset 0"),
    ],
)
def test_bad_encodings(data: bytes, message: str) -> None:
    refused(documents.decode, data, match=message)


# -- YAML -----------------------------------------------------------------------------------


def test_depth_limit_is_inclusive() -> None:
    """The document's own collection is level 1; scalars add no level."""
    limits = Limits(max_depth=3)
    assert documents.yaml_documents("a: {b: [1]}", limits) == [{"a": {"b": [1]}}]
    refused(documents.yaml_documents, "a: {b: [[1]]}", limits, match="deeper than 3 levels")


def test_nodes_count_alias_expansions() -> None:
    """``a: &x [1, 2]`` then ``b: *x``: 1 mapping + 2 keys + 2 lists of 3 = 9 values."""
    text = "a: &x [1, 2]\nb: *x\n"
    assert documents.yaml_documents(text, Limits(max_nodes=9)) == [{"a": [1, 2], "b": [1, 2]}]
    refused(documents.yaml_documents, text, Limits(max_nodes=8), match="more than 8 values")


def test_merge_keys_count_as_aliases() -> None:
    text = "base: &b {x: 1, y: 2}\nmine:\n  <<: *b\n  z: 3\n"
    assert documents.yaml_documents(text)[0]["mine"] == {"x": 1, "y": 2, "z": 3}
    refused(documents.yaml_documents, text, Limits(max_nodes=12), match="more than 12 values")


def test_alias_depth_adds_the_anchor_height() -> None:
    """An alias to a 2-level anchor under 2 levels is 4 levels deep."""
    text = "a: &x [[1]]\nb: [*x]\n"
    assert documents.yaml_documents(text, Limits(max_depth=4))
    refused(documents.yaml_documents, text, Limits(max_depth=3), match="deeper than 3 levels")


def test_document_limit_is_inclusive() -> None:
    text = "a: 1\n---\nb: 2\n"
    assert documents.yaml_documents(text, Limits(max_documents=2)) == [{"a": 1}, {"b": 2}]
    refused(documents.yaml_documents, text, Limits(max_documents=1), match="more than 1 YAML")


def test_recursive_alias_is_refused() -> None:
    refused(documents.yaml_documents, "a: &a {b: *a}\n", match="recursive alias")


def test_undefined_alias_is_malformed() -> None:
    refused(documents.yaml_documents, "a: *nope\n", match="malformed YAML: .*undefined alias")


def test_anchors_do_not_leak_between_documents() -> None:
    refused(documents.yaml_documents, "a: &x 1\n---\nb: *x\n", match="undefined alias")


@pytest.mark.parametrize(
    "text",
    ["a: 2001-02-30\n", "a: " + "7" * 5000 + "\n", "a: \x07\n",
     "a: !!python/object:os.system x\n", "? [a]\n: 1\n"],
)
def test_constructor_failures_are_one_line(text: str) -> None:
    """ValueErrors from PyYAML's constructors and reader errors become one line of the syntax
    class (the library's own words after it are not part of the contract)."""
    with pytest.raises(TextError, match=r"^malformed YAML: ") as caught:
        documents.yaml_documents(text)
    assert "\n" not in str(caught.value)
    assert caught.value.reason is documents.Reason.SYNTAX


@pytest.mark.parametrize("text", ["a: *S3cretTokenValue42\n", "a: [S3cretTokenValue42\n",
                                  "a: !S3cretTokenValue42 x\n", "a: 2001-02-30 # S3cret\n",
                                  "x: &S3cretTokenValue42 [*S3cretTokenValue42]\n"])
def test_unquoted_errors_never_repeat_the_text(text: str) -> None:
    """quote=False (a Secret-backed file): the error says where, never what was found."""
    with pytest.raises(TextError) as caught:
        documents.yaml_documents(text, quote=False)
    assert "S3cret" not in str(caught.value) and "2001" not in str(caught.value)
    with pytest.raises(TextError) as json_caught:
        documents.json_document('{"a": S3cretTokenValue42}', quote=False)
    assert "S3cret" not in str(json_caught.value)


@pytest.mark.parametrize("text", ["x: " + "[" * 1_500 + "]" * 1_500,
                                  "x: " + "{a: " * 1_500 + "1" + "}" * 1_500,
                                  "".join(f"{'  ' * i}k{i}:\n" for i in range(1_500))])
def test_depth_is_one_class_whichever_parser_guard_speaks(text: str) -> None:
    """Beyond libyaml's own nesting guard (PyYAML 6.0.4+) the error is still our depth class."""
    with pytest.raises(TextError) as caught:
        documents.yaml_documents(text)
    assert caught.value.reason is documents.Reason.DEPTH
    assert str(caught.value).startswith("nested deeper than 100 levels")


def test_the_c_loader_is_used_when_available() -> None:
    import yaml

    if getattr(yaml, "__with_libyaml__", False):
        assert documents.LOADER is yaml.CSafeLoader
    else:
        assert documents.LOADER is yaml.SafeLoader


# -- JSON -----------------------------------------------------------------------------------


def test_json_depth_and_nodes() -> None:
    assert documents.json_document('{"a": [1]}', Limits(max_depth=2, max_nodes=3)) == {"a": [1]}
    refused(documents.json_document, '{"a": [[1]]}', Limits(max_depth=2), match="deeper than 2")
    refused(documents.json_document, '{"a": [1, 2]}', Limits(max_nodes=3),
            match="more than 3 values")


def test_json_beyond_the_interpreter_stack_is_the_depth_error() -> None:
    refused(documents.json_document, "[" * 100_000 + "]" * 100_000, match="deeper than 100")


# -- loader errors --------------------------------------------------------------------------


def test_one_line_escapes_control_characters() -> None:
    """Names from the input cannot break the line or drive the terminal."""
    assert loader.one_line("a\nb\x1b[2J\u2028c") == "a\\nb\\x1b[2J\\u2028c"
    assert loader.one_line("plain é") == "plain é"
    error = loader.LoadError("f\n.yaml", "x", "bad\rvalue")
    assert str(error) == "f\\n.yaml: x: bad\\rvalue"


def test_int32_overflow_names_the_type() -> None:
    text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\n"
    text += "spec: {replicas: 2147483648}\n"
    with pytest.raises(loader.LoadError) as caught:
        loader.parse_manifests([("w.yaml", text)])
    assert str(caught.value) == (
        "w.yaml: spec.replicas: must be at most 2147483647 (int32, as in Kubernetes)"
    )


@pytest.mark.timeout(30)
def test_the_pure_python_loader_keeps_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libyaml the same checks run on the pure-Python parser's events."""
    import yaml

    monkeypatch.setattr(documents, "LOADER", yaml.SafeLoader)
    assert documents.yaml_documents("a: &x [1]\nb: *x\n") == [{"a": [1], "b": [1]}]
    refused(documents.yaml_documents, "x: " + "[" * 5000 + "]" * 5000, match="deeper than 100")
    laughs = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"b{i}: &b{i} [{', '.join(['*a' if i == 0 else f'*b{i - 1}'] * 10)}]\n"
        for i in range(8)
    )
    refused(documents.yaml_documents, laughs, match="values after expanding aliases")
    refused(documents.yaml_documents, "a: \x07\n", match="position 3")
