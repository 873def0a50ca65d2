"""Hostile templates and parameters end in a one-line CueError within the budget.

Each test performs the attack for real: without the budget the evaluation would hang, blow
the stack or fill memory (a nested comprehension of 10^12 iterations, a 2^60-character
string, a catastrophic regular expression on a tenant's value...).
"""

from __future__ import annotations

import time

import pytest

from federation.cue import Budget, CueError, evaluate_expression, export, parse
from tests.unit.cue.helpers import run

SMALL = Budget(steps=200_000)


def refused(source: str, fill: dict[str, object] | None = None, match: str = "budget",
            budget: Budget = SMALL) -> str:
    started = time.process_time()
    with pytest.raises(CueError, match=match) as err:
        run(source, fill=fill, budget=budget)
    assert time.process_time() - started < 20, "the budget must stop it early"
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_comprehension_over_a_huge_range_is_stopped() -> None:
    refused('import "list"\na: [for x in list.Range(0, 1000000000, 1) {x}]\n')


def test_nested_comprehensions_are_stopped_by_the_step_budget() -> None:
    source = ('import "list"\nl: list.Range(0, 1000, 1)\n'
              "a: [for x in l for y in l for z in l {1}]\n")
    refused(source, match="step budget")


def test_a_million_element_list_by_repetition_is_refused() -> None:
    refused("a: [1] * 1000000\n")
    refused("a: [for x in [1] * 1000000 {x}]\n")


def test_string_doubling_is_refused_by_size() -> None:
    doubling = "a0: \"xxxxxxxx\"\n" + "".join(f"a{i + 1}: a{i} + a{i}\n" for i in range(60))
    refused(doubling, match="size budget")
    refused('import "strings"\na: strings.Repeat("x", 1000000000)\n', match="size budget")
    refused('a: "x" * 1000000000\n', match="size budget")


def test_deep_nesting_in_the_template_is_refused_at_parse() -> None:
    deep = "a: " + "{b: " * 5000 + "1" + "}" * 5000 + "\n"
    with pytest.raises(CueError, match="depth budget"):
        parse(deep)
    with pytest.raises(CueError, match="depth budget"):
        parse("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(CueError, match="depth budget"):
        parse("a: " + "-" * 5000 + "1\n")


def test_deep_nesting_in_a_parameter_is_refused() -> None:
    deep: dict[str, object] = {}
    inner = deep
    for _ in range(5000):
        inner["x"] = {}
        inner = inner["x"]  # type: ignore[assignment]
    refused("parameter: {...}\nout: parameter\n", fill={"parameter": deep}, match="depth budget")


def test_a_long_chain_of_references_is_stopped_by_the_depth_budget() -> None:
    chain = "".join(f"a{i}: a{i + 1}\n" for i in range(3000)) + "a3000: 1\n"
    refused(chain, match="depth")


def test_reference_cycles_end_as_errors() -> None:
    for source in ("a: b\nb: c\nc: a\n", "a: {x: a.x + 1}\n", "a: b + 1\nb: a - 1\n"):
        refused(source, match="cycle")


def test_a_recursive_definition_is_stopped() -> None:
    refused("#T: {next: #T}\nx: #T\n", match="depth|step|cycle")


def test_a_catastrophic_regex_on_a_tenant_value_runs_in_linear_time() -> None:
    source = 'parameter: name: =~"^(a+)+$"\nout: parameter.name\n'
    started = time.process_time()
    with pytest.raises(CueError, match=r"parameter\.name"):
        run(source, fill={"parameter": {"name": "a" * 5000 + "!"}})
    assert time.process_time() - started < 10


def test_regex_constructs_re2_lacks_are_refused() -> None:
    for pattern in (r"(a)\\1", "(?=a)", "(?!a)", "(?<=a)b", "a++", "a{5000}"):
        with pytest.raises(CueError, match="regular expression"):
            run(f'a: "aa" =~ "{pattern}"\n')


def test_an_oversized_template_is_refused() -> None:
    with pytest.raises(CueError, match="larger than"):
        parse("a: 1\n" * 300_000)
    with pytest.raises(CueError, match="larger than"):
        parse("a: 1\n" * 100, budget=Budget(source_bytes=100))
    with pytest.raises(CueError, match="depth budget of 10"):
        parse("a: " + "{b: " * 20 + "1" + "}" * 20, budget=Budget(depth=10))


def test_an_expression_is_budgeted_too() -> None:
    with pytest.raises(CueError, match="budget"):
        evaluate_expression("[for x in l for y in l for z in l {1}]",
                            {"l": list(range(1000))}, SMALL)


def test_output_size_is_capped() -> None:
    template = parse("out: [for x in parameter.l {a: x, b: x}]\n")
    with pytest.raises(CueError, match="budget"):
        export(template, {"parameter": {"l": list(range(50_000))}}, ["out"],
               Budget(output_values=20_000))
