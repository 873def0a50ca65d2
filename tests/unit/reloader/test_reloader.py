"""The reloader on loopback with real mutual TLS: each action kind, timeouts, failures,
who may call, and parameter values that look like shell syntax."""

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
import pytest_asyncio
from aiohttp import web

from federation.reloader import actions
from federation.reloader.proto import config_manager_pb2 as pb
from federation.reloader.server import (
    ONLINE_UPGRADE,
    STOP_CONTAINER,
    Reloader,
    ReloaderSettings,
    config_version,
)
from federation.work import identity

HOSTILE = "x; touch /tmp/pwned-$(id -u) `reboot` && echo $HOME | cat > f"
# A script that writes its argv, one element per line, as JSON: what the action received.
RECORD = ("import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:])); "
          "print('reloaded')")


def pwned() -> bool:
    """Whether a shell ever ran HOSTILE's command substitution."""
    return Path(f"/tmp/pwned-{os.getuid()}").exists()


class Fixture:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ca = identity.new_ca()
        cert, key = identity.issue_server(self.ca, ["127.0.0.1"])
        for name, data in (("tls.crt", cert), ("tls.key", key), ("ca.crt", self.ca.cert_pem)):
            (tmp / name).write_bytes(data)
        self.config = tmp / "config"
        self.config.mkdir()
        (self.config / "my.ini").write_text("[mysqld]\nmax_connections=100\n")
        self.reloader: Reloader | None = None
        self.address = ""

    async def start(self, action: object, *, pid_file: Path | None = None,
                    allowed_clients: tuple[str, ...] = (), reload_on_change: bool = False
                    ) -> Reloader:
        settings = ReloaderSettings(
            config_dir=self.config, action=actions.parse(action),
            tls_cert=self.tmp / "tls.crt", tls_key=self.tmp / "tls.key",
            tls_ca=self.tmp / "ca.crt", pid_file=pid_file, allowed_clients=allowed_clients,
            reload_on_change=reload_on_change)
        self.reloader = Reloader(settings)
        await self.reloader.scan()
        port = await self.reloader.start("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"
        return self.reloader

    async def call(self, params: dict[str, str], ca: identity.CA | None = None,
                   client: str = "federation-reconfigure",
                   config_file: str = "my.ini") -> pb.OnlineUpgradeParamsResponse:
        cert, key = identity.issue_agent(ca or self.ca, client)
        credentials = grpc.ssl_channel_credentials(self.ca.cert_pem, key, cert)
        async with grpc.aio.secure_channel(self.address, credentials) as channel:
            method = channel.unary_unary(
                ONLINE_UPGRADE, request_serializer=pb.OnlineUpgradeParamsRequest.SerializeToString,
                response_deserializer=pb.OnlineUpgradeParamsResponse.FromString)
            request = pb.OnlineUpgradeParamsRequest(config_spec="mysql",
                                                    config_file=config_file, params=params)
            answer: pb.OnlineUpgradeParamsResponse = await method(request, timeout=10)
            return answer

    async def stop_container(self) -> pb.StopContainerResponse:
        cert, key = identity.issue_agent(self.ca, "federation-reconfigure")
        credentials = grpc.ssl_channel_credentials(self.ca.cert_pem, key, cert)
        async with grpc.aio.secure_channel(self.address, credentials) as channel:
            method = channel.unary_unary(
                STOP_CONTAINER, request_serializer=pb.StopContainerRequest.SerializeToString,
                response_deserializer=pb.StopContainerResponse.FromString)
            stopped: pb.StopContainerResponse = await method(pb.StopContainerRequest(),
                                                             timeout=10)
            return stopped


@pytest_asyncio.fixture(loop_scope="function")  # grpc.aio binds to the test's loop
async def fx(tmp_path: Path) -> AsyncIterator[Fixture]:
    fixture = Fixture(tmp_path)
    try:
        yield fixture
    finally:
        if fixture.reloader is not None:
            await fixture.reloader.stop(0)


def sleeper() -> subprocess.Popen[bytes]:
    """A process that records the signals it gets (its stdout says which, then it exits)."""
    code = ("import signal, sys, time\n"
            "def on(n, f):\n print(signal.Signals(n).name, flush=True)\n"
            " if n == signal.SIGTERM: sys.exit(0)\n"
            "signal.signal(signal.SIGHUP, on); signal.signal(signal.SIGTERM, on)\n"
            "print('up', flush=True)\n"
            "while True: time.sleep(0.05)\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"up\n"
    return process


async def test_exec_passes_parameters_as_single_literal_arguments(fx: Fixture) -> None:
    out = fx.tmp / "argv.json"
    await fx.start({"kind": "exec", "command": [sys.executable, "-c", RECORD, str(out)]})
    answer = await fx.call({"max_connections": "200", "evil": HOSTILE})
    assert not answer.err_message and answer.err_message == "" and answer.output == "reloaded\n"
    assert json.loads(out.read_text()) == [f"evil={HOSTILE}", "max_connections=200"]
    assert answer.config_version == config_version(fx.config)
    assert not pwned()


@pytest.mark.parametrize(("params", "message"), [
    ({"--config": "/etc/shadow"}, "must be letters"),
    ({"a b": "1"}, "must be letters"),
    ({"a": "x\0y"}, "NUL character"),
])
async def test_parameters_that_could_become_options_are_refused(
        fx: Fixture, params: dict[str, str], message: str) -> None:
    out = fx.tmp / "argv.json"
    await fx.start({"kind": "exec", "command": [sys.executable, "-c", RECORD, str(out)]})
    answer = await fx.call(params)
    assert answer.err_message and message in answer.err_message
    assert "shadow" not in answer.err_message and not out.exists()


async def test_template_renders_each_element_without_a_shell(fx: Fixture) -> None:
    out = fx.tmp / "argv.json"
    await fx.start({"kind": "template", "command": [
        sys.executable, "-c", RECORD, str(out), "--set", "max={{ max_connections }}",
        "{{configFile}}", "{{ evil }}"]})
    answer = await fx.call({"max_connections": "200", "evil": HOSTILE})
    assert not answer.err_message, answer.err_message
    assert json.loads(out.read_text()) == ["--set", "max=200", "my.ini", HOSTILE]
    assert not pwned()


async def test_template_naming_a_missing_parameter_fails_and_runs_nothing(fx: Fixture) -> None:
    out = fx.tmp / "argv.json"
    await fx.start({"kind": "template",
                    "command": [sys.executable, "-c", RECORD, str(out), "{{ nope }}"]})
    answer = await fx.call({"max_connections": "200"})
    assert answer.err_message and "no parameter 'nope'" in answer.err_message
    assert not out.exists()


async def test_signal_reaches_the_process_in_the_pid_file(fx: Fixture) -> None:
    process = sleeper()
    try:
        (fx.tmp / "pid").write_text(f"{process.pid}\n")
        await fx.start({"kind": "signal", "pidFile": str(fx.tmp / "pid")},
                       pid_file=fx.tmp / "pid")
        answer = await fx.call({"max_connections": "200"})
        assert not answer.err_message and f"SIGHUP to process {process.pid}" in answer.output
        assert process.stdout is not None and process.stdout.readline() == b"SIGHUP\n"
        stopped = await fx.stop_container()
        assert not stopped.err_message and process.wait(timeout=10) == 0
        assert process.stdout.readline() == b"SIGTERM\n"
    finally:
        process.kill()
        process.wait()


async def test_signal_to_a_missing_process_fails(fx: Fixture) -> None:
    (fx.tmp / "pid").write_text("not a pid")
    await fx.start({"kind": "signal", "pidFile": str(fx.tmp / "pid")})
    answer = await fx.call({"a": "1"})
    assert answer.err_message and "does not hold a process id" in answer.err_message
    stopped = await fx.stop_container()  # no --pid-file: said so, nothing signalled
    assert stopped.err_message and "no --pid-file" in stopped.err_message


async def test_http_posts_the_parameters(fx: Fixture) -> None:
    received: list[object] = []
    status = [200]

    async def handle(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.Response(text="applied" if status[0] == 200 else "bad value",
                            status=status[0])

    app = web.Application()
    app.router.add_post("/reload", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        await fx.start({"kind": "http", "url": f"http://127.0.0.1:{port}/reload"})
        answer = await fx.call({"max_connections": "200"})
        assert not answer.err_message and answer.output == "applied"
        assert received == [{"configSpec": "mysql", "configFile": "my.ini",
                             "params": {"max_connections": "200"}}]
        status[0] = 400
        answer = await fx.call({"max_connections": "-1"})
        assert answer.err_message and "status 400" in answer.err_message
        assert answer.output == "bad value"
    finally:
        await runner.cleanup()


async def test_a_failing_action_is_reported_failed_with_its_output(fx: Fixture) -> None:
    await fx.start({"kind": "exec", "command": [
        sys.executable, "-c", "import sys; print('x' * 10000); print('bad value'); sys.exit(3)"]})
    answer = await fx.call({"max_connections": "200"})
    assert answer.err_message and "exited with status 3" in answer.err_message
    assert len(answer.output.encode()) == actions.MAX_OUTPUT  # bounded: the tail is kept
    assert answer.output.endswith("bad value\n")


async def test_an_action_that_hangs_is_killed_at_its_timeout(fx: Fixture) -> None:
    await fx.start({"kind": "exec", "timeout": 0.3,
                    "command": [sys.executable, "-c", "import time; time.sleep(60)"]})
    answer = await fx.call({"a": "1"})
    assert answer.err_message and "timed out after 0.3s" in answer.err_message


async def test_a_certificate_from_another_ca_is_refused(fx: Fixture) -> None:
    out = fx.tmp / "argv.json"
    await fx.start({"kind": "exec", "command": [sys.executable, "-c", RECORD, str(out)]})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await fx.call({"a": "1"}, ca=identity.new_ca())
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # the handshake failed
    assert not out.exists() and fx.reloader is not None and fx.reloader.calls == 0


async def test_only_allowed_clients_may_call(fx: Fixture) -> None:
    out = fx.tmp / "argv.json"
    reloader = await fx.start({"kind": "exec",
                               "command": [sys.executable, "-c", RECORD, str(out)]},
                              allowed_clients=("federation-reconfigure",))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await fx.call({"a": "1"}, client="member2")  # same CA, another identity
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "member2" in (caught.value.details() or "")
    assert not out.exists() and reloader.refused == 1 and reloader.calls == 0
    assert not (await fx.call({"a": "1"})).err_message


async def test_the_watch_sees_changes_and_can_reload_on_them(fx: Fixture) -> None:
    out = fx.tmp / "argv.json"
    reloader = await fx.start({"kind": "exec",
                               "command": [sys.executable, "-c", RECORD, str(out)]},
                              reload_on_change=True)
    before = reloader.version
    assert before and not await reloader.scan()
    (fx.config / "my.ini").write_text("[mysqld]\nmax_connections=200\n")
    assert await reloader.scan() and reloader.version != before
    assert json.loads(out.read_text()) == []  # the action ran, with no parameters
    assert reloader.calls == 1


async def test_watch_polls_on_its_interval(tmp_path: Path) -> None:
    ticks: list[float] = []

    class Stop(Exception):
        pass

    async def sleep(seconds: float) -> None:
        ticks.append(seconds)
        if len(ticks) == 3:
            raise Stop

    settings = ReloaderSettings(config_dir=tmp_path / "missing", action=actions.parse(
        {"kind": "exec", "command": ["true"]}), tls_cert=Path(), tls_key=Path(),
        tls_ca=Path(), poll_interval=2.0)
    reloader = Reloader(settings)
    with pytest.raises(Stop):
        await reloader.watch(sleep)
    assert ticks == [2.0, 2.0, 2.0] and reloader.version == ""  # unreadable: not ready


def test_config_version_follows_the_kubelets_symlinks(tmp_path: Path) -> None:
    """A mounted ConfigMap: ..data -> ..2026_x/, my.ini -> ..data/my.ini; the swap of
    ..data changes the version, and the hidden copies are not hashed twice."""
    first = tmp_path / "..2026_1"
    first.mkdir()
    (first / "my.ini").write_text("a=1\n")
    (tmp_path / "..data").symlink_to(first.name)
    (tmp_path / "my.ini").symlink_to("..data/my.ini")
    before = config_version(tmp_path)
    second = tmp_path / "..2026_2"
    second.mkdir()
    (second / "my.ini").write_text("a=2\n")
    (tmp_path / "..data").unlink()
    (tmp_path / "..data").symlink_to(second.name)
    assert config_version(tmp_path) != before


@pytest.mark.parametrize(("data", "message"), [
    ({"kind": "exec"}, "action.command: Field required"),
    ({"kind": "exec", "command": ["x"], "shell": True}, "action.shell: Extra inputs"),
    ({"kind": "signal", "pidFile": "/p", "signal": "SIGFOO"}, "unknown signal 'SIGFOO'"),
    ({"kind": "http", "url": "file:///etc/passwd"}, "action.url"),
    ({"kind": "exec", "command": ["x"], "timeout": 0}, "action.timeout"),
    # issue 20, finding 14: an action that may hold every later call for ever
    ({"kind": "exec", "command": ["x"], "timeout": float("inf")}, "action.timeout"),
    ({"kind": "exec", "command": ["x"], "timeout": float("nan")}, "action.timeout"),
    ({"kind": "exec", "command": ["x"], "timeout": 301}, "action.timeout"),
    ({"kind": "sh"}, "action: Input tag 'sh'"),
])
def test_a_bad_action_file_is_refused_naming_the_field(data: object, message: str) -> None:
    with pytest.raises(actions.ActionError, match=message.replace("(", r"\(")):
        actions.parse(data)


def test_the_signal_default_is_sighup() -> None:
    action = actions.parse({"kind": "signal", "pidFile": "/run/app.pid"})
    assert isinstance(action, actions.SignalAction)
    assert signal.Signals[action.signal] == signal.SIGHUP


async def test_health_and_readiness(fx: Fixture) -> None:
    import aiohttp

    reloader = await fx.start({"kind": "exec", "command": ["true"]})
    runner = await reloader.serve_health("127.0.0.1:0")
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
            async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 200 and reloader.version in await response.text()
            await reloader.stop(0)
            async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 503
    finally:
        await runner.cleanup()
    await asyncio.sleep(0)


async def test_parameter_values_are_never_logged(fx: Fixture,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await fx.start({"kind": "exec", "command": [sys.executable, "-c", "import sys; sys.exit(1)"]})
    answer = await fx.call({"password": "s3cr3t-value"})
    assert answer.err_message and "s3cr3t-value" not in answer.err_message
    assert "password" in caplog.text and "s3cr3t-value" not in caplog.text


def test_the_command_refuses_a_bad_action_file_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from federation.commands.reloader import reloader

    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "action.yaml").write_text("kind: exec\ncommand: [nginx]\nshell: true\n")
    args = ["--config-dir", str(tmp_path), "--action", str(tmp_path / "action.yaml"),
            "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
            "--tls-ca", str(tmp_path / "ca.crt"), "--namespace", "shop"]
    result = CliRunner().invoke(reloader, args)
    assert result.exit_code == 1
    assert "action.shell: Extra inputs are not permitted" in result.output
    result = CliRunner().invoke(reloader, [*args[:-3], str(tmp_path / "missing.crt"),
                                           "--namespace", "shop"])
    assert result.exit_code == 1 and "--tls-ca" in result.output


def test_the_command_needs_the_namespace_it_serves(tmp_path: Path) -> None:
    """Without --namespace or $POD_NAMESPACE the reloader does not start: it could not
    tell a call meant for its workload from one redirected from another namespace."""
    from click.testing import CliRunner

    from federation.commands.reloader import reloader

    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    args = ["--config-dir", str(tmp_path), "--action", str(tmp_path / "action.yaml"),
            "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
            "--tls-ca", str(tmp_path / "ca.crt")]
    result = CliRunner().invoke(reloader, args, env={"POD_NAMESPACE": None})
    assert result.exit_code == 2 and "--namespace" in result.output
    (tmp_path / "action.yaml").write_text("kind: exec\ncommand: [true]\n")
    result = CliRunner().invoke(reloader, [*args, "--namespace", ""],
                                env={"POD_NAMESPACE": None})
    assert result.exit_code == 1 and "--namespace (or $POD_NAMESPACE) is empty" in \
        result.output, result.output


async def test_an_action_whose_caller_gives_up_is_killed(tmp_path: Path) -> None:
    """A cancelled call (the client's deadline passed) kills its program at once: nobody
    would reap it at its own timeout, and it would overlap the next call."""
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); " \
             "time.sleep(60)"
    call = asyncio.create_task(actions._exec([sys.executable, "-c", script], 30.0))
    deadline = asyncio.get_running_loop().time() + 60  # a loaded machine starts Python slowly
    while not pid_file.exists() or not pid_file.read_text():
        assert asyncio.get_running_loop().time() < deadline, "the action never started"
        await asyncio.sleep(0.02)
    pid = int(pid_file.read_text())
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    while _running(pid):
        assert asyncio.get_running_loop().time() < deadline, "the action outlived its caller"
        await asyncio.sleep(0.02)


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:  # gone, or reaped between the open and the read (ESRCH)
        return False
    return state != "Z"


# -- issue 20, findings 13 and 14 -----------------------------------------------------------


@pytest.mark.parametrize("config_file", ["my\0.ini", "-rf", "--config=/etc/shadow",
                                         "a" * 254, "../../etc/passwd", "my ini"])
async def test_a_config_file_that_is_no_configmap_key_fails_and_runs_nothing(
        fx: Fixture, config_file: str) -> None:
    """A NUL answered gRPC UNKNOWN (the exec raised), and ``{{ configFile }}`` alone in an
    argument let a key starting with '-' become an option: a failed answer, nothing run."""
    out = fx.tmp / "argv.json"
    await fx.start({"kind": "template",
                    "command": [sys.executable, "-c", RECORD, str(out), "{{ configFile }}"]})
    answer = await fx.call({"max_connections": "200"}, config_file=config_file)
    assert answer.err_message
    assert "config_file must be a ConfigMap key or name" in answer.err_message
    assert not out.exists()


async def test_an_action_that_raises_is_a_failed_answer_not_unknown(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(action: object, request: object) -> actions.Outcome:
        raise ValueError("embedded null byte")

    await fx.start({"kind": "exec", "command": ["true"]})
    monkeypatch.setattr(actions, "run", broken)
    answer = await fx.call({"max_connections": "200"})
    assert answer.err_message and answer.err_message == "the exec action failed (ValueError)"


def hostile_action_files(tmp_path: Path) -> dict[str, Path]:
    cases = {
        "utf8": b"kind: exec\ncommand: [\xff\xfe]\n",
        "nul": b"kind: exec\0\ncommand: [x]\n",
        "syntax": b"kind: exec\ncommand: [x\n",
        "python-tag": b"kind: !!python/object/apply:os.system [id]\ncommand: [x]\n",
        "deep": b"kind: exec\ncommand: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        "digits": b"kind: exec\ncommand: [x]\ntimeout: " + b"9" * 100_000 + b"\n",
        "empty": b"",
    }
    paths = {}
    for name, data in cases.items():
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_bytes(data)
    big = tmp_path / "big.yaml"
    with big.open("wb") as out:  # 50 MB: refused after reading 64 KiB of it
        out.write(b"kind: exec\ncommand: [x]\n# " + b"x" * (50 * 2**20) + b"\n")
    paths["big"] = big
    return paths


@pytest.mark.timeout(60)
def test_hostile_action_files_are_one_line_and_exit_1(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from federation.commands.reloader import reloader

    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    for name, path in hostile_action_files(tmp_path).items():
        started = time.perf_counter()
        result = CliRunner().invoke(reloader, [
            "--config-dir", str(tmp_path), "--action", str(path),
            "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
            "--tls-ca", str(tmp_path / "ca.crt"), "--namespace", "shop"])
        assert time.perf_counter() - started < 5, name
        assert result.exit_code == 1, (name, result.output, result.exception)
        assert result.exception is None or isinstance(result.exception, SystemExit), name
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"Error: --action {path}: "), \
            (name, result.output)
        assert "Traceback" not in result.output


async def test_the_deprecated_service_still_answers(fx: Fixture) -> None:
    """A control plane of the previous release calls federation.reloader.v1 (fields 2 and 3
    the other way round): an upgraded reloader still serves it, with the same checks."""
    from federation.reloader.proto import reconfigure_pb2 as legacy
    from federation.reloader.server import LEGACY_ONLINE_UPGRADE

    out = fx.tmp / "argv.json"
    await fx.start({"kind": "exec", "command": [sys.executable, "-c", RECORD, str(out)]})
    cert, key = identity.issue_agent(fx.ca, "federation-reconfigure")
    credentials = grpc.ssl_channel_credentials(fx.ca.cert_pem, key, cert)
    async with grpc.aio.secure_channel(fx.address, credentials) as channel:
        method = channel.unary_unary(
            LEGACY_ONLINE_UPGRADE,
            request_serializer=legacy.OnlineUpgradeParamsRequest.SerializeToString,
            response_deserializer=legacy.OnlineUpgradeParamsResponse.FromString)
        answer: legacy.OnlineUpgradeParamsResponse = await method(
            legacy.OnlineUpgradeParamsRequest(config_spec="mysql", config_file="my.ini",
                                              params={"a": "1", "--x": "2"}), timeout=10)
    assert not answer.ok and "must be letters" in answer.err_message and not out.exists()


async def test_stop_container_refuses_a_container_list(fx: Fixture) -> None:
    """KubeBlocks' StopContainer named containers; one reloader stops its one process, so
    a list is refused by name rather than ignored (nothing is signalled)."""
    process = sleeper()
    try:
        (fx.tmp / "pid").write_text(f"{process.pid}\n")
        await fx.start({"kind": "signal", "pidFile": str(fx.tmp / "pid")},
                       pid_file=fx.tmp / "pid")
        cert, key = identity.issue_agent(fx.ca, "federation-reconfigure")
        credentials = grpc.ssl_channel_credentials(fx.ca.cert_pem, key, cert)
        async with grpc.aio.secure_channel(fx.address, credentials) as channel:
            method = channel.unary_unary(
                STOP_CONTAINER, request_serializer=pb.StopContainerRequest.SerializeToString,
                response_deserializer=pb.StopContainerResponse.FromString)
            stopped: pb.StopContainerResponse = await method(
                pb.StopContainerRequest(container_ids=["containerd://abc"]), timeout=10)
        assert "containerIDs are not taken" in stopped.err_message
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()
