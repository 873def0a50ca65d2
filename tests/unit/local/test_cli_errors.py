"""Bad input to `fedctl local` gives one clear line and exit status 1."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from federation.cli import cli


@pytest.mark.parametrize("members", ["abc", "0", "-2", "1.5", "999"])
def test_malformed_members_is_one_line(members: str, tmp_path: Path) -> None:
    """--members must be a whole number in range; nothing is created otherwise."""
    result = CliRunner().invoke(cli, ["local", "up", "--members", members,
                                      "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --members must be")
    assert not (tmp_path / "s").exists()


def test_status_without_a_fleet_says_how_to_start_one(tmp_path: Path) -> None:
    """Commands needing a fleet name the state dir and the command to run."""
    result = CliRunner().invoke(cli, ["local", "status", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: no local fleet in {tmp_path.resolve()}; run `fedctl local up` first")


def test_unknown_cluster_name_lists_the_known_ones(tmp_path: Path) -> None:
    """stop NAME with a name not in the fleet lists the valid names."""
    from federation.local import fleet

    target = fleet.Fleet(tmp_path, tmp_path / "kc.yaml")
    target._save(target._plan(2, None, None))
    result = CliRunner().invoke(cli, ["local", "stop", "member9", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == ("error: no cluster named 'member9' in the local fleet "
                                     "(have: hub, member1, member2)")


@pytest.mark.parametrize(("args", "message"), [
    (["up", "--in-cluster"], "error: --in-cluster needs --control-plane"),
    (["up", "--control-plane", "--token-rotate", "5"],
     "error: --token-rotate needs --control-plane --in-cluster"),
    (["pods", "just-a-name"], "error: DEPLOYMENT 'just-a-name' is not NAMESPACE/NAME"),
    (["pods", "ns/x", "--service", "work"], "error: --service 'work' is not NAME=PORT"),
])
def test_in_cluster_options_are_checked_first(args: list[str], message: str,
                                              tmp_path: Path) -> None:
    """The in-cluster flags and the pod runner's arguments: one line, nothing created."""
    result = CliRunner().invoke(cli, ["local", *args, "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 1
    assert result.output.strip() == message
    assert not (tmp_path / "s").exists()


def test_one_control_plane_mode_at_a_time(tmp_path: Path) -> None:
    """A fleet whose control plane runs in-cluster refuses to start a host-process one
    beside it (two would both reconcile without a shared lease), naming the way out."""
    from federation.local import fleet, pods, processes

    target = fleet.Fleet(tmp_path, tmp_path / "kc.yaml")
    target._save(target._plan(1, None, None))
    runner = pods.directory(target.state_dir, "hub", *target.CONTROL_PLANE) / "runner.pid"
    runner.parent.mkdir(parents=True)
    processes.spawn(["sleep", "30"], runner, runner.with_suffix(".log"))
    try:
        with pytest.raises(fleet.FleetError, match="an in-cluster one already runs in this "
                                                   "fleet; `fedctl local down` first"):
            target.start_control_plane(lambda _: None)
    finally:
        processes.terminate(runner)
