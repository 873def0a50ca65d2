"""Integer and boolean field types, checked the way the Kubernetes API server checks them.

YAML and JSON both let a document say ``replicas: true`` or ``replicas: 2.0``;
pydantic's default (lax) mode would read those as 1 and 2, and Python would
happily carry ``replicas: 9223372036854775807`` into the division. The API
server refuses all three for an ``int32`` field (``spec.replicas`` of a
Deployment, Karmada's ``minReplicas``/``maxReplicas``), so a file that plans
fine offline could never be applied. These types make every count strict (an
integer, never a boolean, float or string) and bounded by its Kubernetes type;
booleans are strict too, so ``ready: 1`` is refused rather than read as true.
The loader turns a violation into one line naming the field.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

Replicas = Annotated[int, Strict(), Field(ge=0, le=INT32_MAX)]
"""A replica count (replicas, minReplicas/maxReplicas, availableReplicas): int32, not negative."""

Weight = Annotated[int, Strict(), Field(ge=1, le=INT64_MAX)]
"""A static weight: Karmada's int64 with a minimum of 1."""

Int32 = Annotated[int, Strict(), Field(ge=-(2**31), le=INT32_MAX)]
"""A plain int32 (a policy's priority)."""

Groups = Annotated[int, Strict(), Field(ge=0, le=INT32_MAX)]
"""A group count of a spread constraint (minGroups/maxGroups)."""

Seconds = Annotated[int, Strict(), Field(ge=-(2**63), le=INT64_MAX)]
"""An int64 duration in seconds (tolerationSeconds; Kubernetes treats negatives as 0)."""

PositiveSeconds = Annotated[int, Strict(), Field(ge=1, le=INT32_MAX)]
"""An int32 duration that must be positive (Karmada's ``gracePeriodSeconds``)."""

Flag = Annotated[bool, Strict()]
"""A boolean that must be written as one (``true``/``false``), not ``1`` or ``"yes"``."""


def is_replicas(value: object) -> bool:
    """True when ``value`` is a valid replica count (for data read from live objects, where
    a bad number is treated as absent instead of refused)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX
