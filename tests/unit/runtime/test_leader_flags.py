"""`fedctl run`'s election timing flags: honoured, or refused in one line naming the rule."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from federation.commands import run as run_command
from federation.runtime import leader


def test_timings_given_are_used_and_the_rest_keep_their_defaults() -> None:
    settings = run_command.leader_settings(True, "kube-system", "lease", {
        "lease_duration": 6, "renew_deadline": 4.0, "retry_period": None})
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == \
        (6, 4.0, 2.0)
    assert settings.name == "lease"


def test_a_timing_without_leader_election_is_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="--leader-elect-renew-deadline needs --leader-elect"):
        run_command.leader_settings(False, "kube-system", "lease", {
            "lease_duration": None, "renew_deadline": 4.0, "retry_period": None})


def test_a_fractional_lease_is_refused() -> None:
    """The Lease holds whole seconds: 10.9 stored as 10 would let a standby in early."""
    with pytest.raises(ValueError, match="whole seconds"):
        leader.LeaderSettings(lease_duration=10.9, renew_deadline=10.5)


@pytest.mark.parametrize("argv, error", [
    (["--leader-elect-retry-period", "1"], "--leader-elect-retry-period needs --leader-elect"),
    (["--leader-elect", "--leader-elect-lease-duration", "8",
      "--leader-elect-renew-deadline", "8"], "renew_deadline (8.0) < lease_duration (8)"),
    (["--leader-elect", "--leader-elect-retry-period", "0"], "0 < retry_period (0.0)"),
])
def test_the_command_refuses_bad_timings_in_one_line(argv: list[str], error: str) -> None:
    result = CliRunner().invoke(run_command.run, ["--kubeconfig", "/nonexistent", *argv])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and error in lines[0], result.output
