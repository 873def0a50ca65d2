"""Kubernetes resource quantities, exact: parse, add, compare and print as the API does.

Karmada's ``kube.resourceAdd`` and ``kube.accuratePodRequirements`` return quantities as
Kubernetes prints them (``100m``, ``128Mi``, ``1500m``, ``2``), and expected outputs are
compared as quantities (``0.1`` equals ``100m``). A float would print ``0.30000000000000004``;
so values are exact fractions, rounded up to nano units on parse as the API server does.
"""

from __future__ import annotations

import dataclasses
import fractions
import math
import re

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_PATTERN = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_NANO = 10 ** 9

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


@dataclasses.dataclass(frozen=True)
class Quantity:
    value: fractions.Fraction
    format: str = DECIMAL_SI

    @classmethod
    def parse(cls, text: str) -> Quantity:
        found = _PATTERN.match(text.strip())
        if found is None or len(text) > 64:
            raise QuantityError(f"quantities must match the regular expression "
                                f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text[:64]!r}")
        sign, number, suffix = found.group(1), found.group(2), found.group(3) or ""
        value = fractions.Fraction(number)
        if suffix in _BINARY:
            value *= 1024 ** _BINARY[suffix]
            form = BINARY_SI
        elif suffix in _DECIMAL:
            value *= fractions.Fraction(10) ** _DECIMAL[suffix]
            form = DECIMAL_SI
        else:
            value *= fractions.Fraction(10) ** int(suffix[1:])
            form = DECIMAL_EXPONENT
        value = fractions.Fraction(math.ceil(value * _NANO), _NANO)
        return cls(-value if sign == "-" else value, form)

    def __add__(self, other: Quantity) -> Quantity:
        form = other.format if self.value == 0 else self.format
        return Quantity(self.value + other.value, form)

    def milli(self) -> int:
        """Kubernetes' MilliValue: rounded up to whole thousandths."""
        return math.ceil(self.value * 1000)

    def whole(self) -> int:
        """Kubernetes' Value: rounded up to a whole number."""
        return math.ceil(self.value)

    def __str__(self) -> str:
        if self.value == 0:
            return "0"
        form = self.format
        if form == BINARY_SI and (abs(self.value) < 1024 or self.value.denominator != 1):
            form = DECIMAL_SI
        if form == BINARY_SI:
            return _binary(int(self.value))
        return _decimal(self.value, form)


def _binary(value: int) -> str:
    exponent = 0
    while exponent < 6 and value % 1024 == 0 and value != 0:
        value //= 1024
        exponent += 1
    suffix = [k for k, v in _BINARY.items() if v == exponent]
    return f"{value}{suffix[0] if suffix else ''}"


def _decimal(value: fractions.Fraction, form: str) -> str:
    nanos = int(value * _NANO)  # exact: parse rounded to nano units
    exponent = -9
    while nanos % 1000 == 0 and exponent < 18 and nanos != 0:
        nanos //= 1000
        exponent += 3
    if form == DECIMAL_EXPONENT:
        return f"{nanos}" if exponent == 0 else f"{nanos}e{exponent}"
    suffix = [k for k, v in _DECIMAL.items() if v == exponent]
    return f"{nanos}{suffix[0]}"


ZERO = Quantity(fractions.Fraction(0))


def milli_cpu(milli: int) -> Quantity:
    return Quantity(fractions.Fraction(milli, 1000), DECIMAL_SI)


def count(value: int, form: str) -> Quantity:
    return Quantity(fractions.Fraction(value), form)


def equal(left: object, right: object) -> bool:
    """Whether two quantities (text or numbers) are the same amount."""
    try:
        return Quantity.parse(str(left)).value == Quantity.parse(str(right)).value
    except QuantityError:
        return False
