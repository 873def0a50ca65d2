"""The Reconfigure client against a real reloader on loopback with mutual TLS: an applied
call, a failed action, and the attacks a caller must not fall for (a server with another
CA's certificate, or with the right CA but not the reloaders' name)."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from federation.commands import reloader_ca
from federation.hub.rollouts import RELOADER_CLIENT_NAME, RELOADER_SERVER_NAME
from federation.reloader import actions
from federation.reloader.client import (
    SERVER_NAME,
    ClientTLS,
    ReloaderUnreachable,
    UpgradeResult,
    online_upgrade,
)
from federation.reloader.server import Reloader, ReloaderSettings, config_version
from federation.work import identity

SECRET_VALUE = "s3cret-value-never-shown"
RECORD = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"


class Server:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ca = identity.new_ca(common_name="federation-reloader-ca")
        self.config = tmp / "config"
        self.config.mkdir()
        (self.config / "my.ini").write_text("[mysqld]\nmax_connections=100\n")
        self.out = tmp / "argv.json"
        self.reloader: Reloader | None = None
        self.address = ""

    def client(self, ca: identity.CA | None = None) -> ClientTLS:
        return reloader_ca.client_tls_from(ca or self.ca)

    async def start(self, command: list[str] | None = None, *,
                    cert: tuple[bytes, bytes] | None = None,
                    allowed: tuple[str, ...] = (RELOADER_CLIENT_NAME,),
                    namespace: str = "shop") -> None:
        cert_pem, key_pem = cert or reloader_ca.server_certificate(self.ca)
        for name, data in (("tls.crt", cert_pem), ("tls.key", key_pem),
                           ("ca.crt", self.ca.cert_pem)):
            (self.tmp / name).write_bytes(data)
        action = {"kind": "exec", "timeout": 5,
                  "command": command or [sys.executable, "-c", RECORD, str(self.out)]}
        self.reloader = Reloader(ReloaderSettings(
            config_dir=self.config, action=actions.parse(action),
            tls_cert=self.tmp / "tls.crt", tls_key=self.tmp / "tls.key",
            tls_ca=self.tmp / "ca.crt", allowed_clients=allowed, namespace=namespace))
        await self.reloader.scan()
        self.address = f"127.0.0.1:{await self.reloader.start('127.0.0.1:0')}"

    async def call(self, tls: ClientTLS | None = None, timeout: float = 10,
                   namespace: str = "shop") -> UpgradeResult:
        return await online_upgrade(self.address, tls or self.client(), namespace=namespace,
                                    config_spec="mysql", config_file="my.ini",
                                    params={"mysqld.max_connections": SECRET_VALUE},
                                    timeout=timeout)


@pytest_asyncio.fixture(loop_scope="function")  # grpc.aio binds to the test's loop
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    fixture = Server(tmp_path)
    try:
        yield fixture
    finally:
        if fixture.reloader is not None:
            await fixture.reloader.stop(0)


def test_the_client_verifies_the_name_the_hub_module_gives() -> None:
    assert SERVER_NAME == RELOADER_SERVER_NAME


def test_client_tls_never_shows_its_key() -> None:
    tls = reloader_ca.client_tls_from(identity.new_ca())
    assert "PRIVATE" not in repr(tls) and "PRIVATE" not in str(tls)


async def test_an_applied_call_reports_ok_and_the_config_version(server: Server) -> None:
    await server.start()
    result = await server.call()
    assert result == UpgradeResult(True, "", config_version(server.config))
    assert json.loads(server.out.read_text()) == [f"mysqld.max_connections={SECRET_VALUE}"]


async def test_a_failed_action_is_a_result_not_an_exception(server: Server) -> None:
    await server.start([sys.executable, "-c", "import sys; sys.exit(3)"])
    result = await server.call()
    assert not result.ok and "exited with status 3" in result.message
    assert SECRET_VALUE not in result.message


async def test_a_server_with_another_cas_certificate_is_unreachable_and_nothing_ran(
        server: Server) -> None:
    await server.start(cert=reloader_ca.server_certificate(identity.new_ca()))
    with pytest.raises(ReloaderUnreachable) as caught:
        await server.call()
    assert server.address in str(caught.value) and SECRET_VALUE not in str(caught.value)
    assert not server.out.exists() and server.reloader is not None
    assert server.reloader.calls == 0


async def test_a_server_of_the_right_ca_without_the_reloader_name_is_refused(
        server: Server) -> None:
    # An agent certificate is signed by a CA the client may trust, but it is not a
    # reloader's: the name check, not the signature alone, decides.
    await server.start(cert=identity.issue_server(server.ca, ["127.0.0.1", "localhost"]))
    with pytest.raises(ReloaderUnreachable):
        await server.call()
    assert not server.out.exists()


async def test_a_client_certificate_from_another_ca_never_runs_the_action(
        server: Server) -> None:
    await server.start()
    stranger = ClientTLS(server.ca.cert_pem, *identity.issue_client(
        identity.new_ca(), RELOADER_CLIENT_NAME))
    with pytest.raises(ReloaderUnreachable):
        await server.call(stranger)
    assert not server.out.exists()


async def test_a_caller_outside_allow_client_gets_the_refusal(server: Server) -> None:
    await server.start(allowed=("someone-else",))
    result = await server.call()
    assert not result.ok and "PERMISSION_DENIED" in result.message
    assert result.config_version == "" and not server.out.exists()


async def test_nothing_listening_is_unreachable_naming_the_address() -> None:
    with socket.socket() as held:  # a port that is bound but never accepts
        held.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises(ReloaderUnreachable, match=address):
            await online_upgrade(address, reloader_ca.client_tls_from(identity.new_ca()),
                                 namespace="shop", config_spec="c", config_file="f",
                                 params={"a": "1"}, timeout=5)


async def test_a_server_that_never_answers_is_unreachable_at_the_deadline() -> None:
    # Accepts the connection and never speaks: the handshake cannot finish, the call's
    # deadline (handshake included) ends it.
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    address = f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        with pytest.raises(ReloaderUnreachable, match=rf"{address}: no answer within 0\.3s"):
            await online_upgrade(address, reloader_ca.client_tls_from(identity.new_ca()),
                                 namespace="shop", config_spec="c", config_file="f",
                                 params={"a": "1"}, timeout=0.3)
    finally:
        for writer in held:
            writer.close()
        listener.close()
        await listener.wait_closed()


async def test_a_call_meant_for_another_namespace_is_refused_and_runs_nothing(
        server: Server) -> None:
    """The redirection attack: team bank's EndpointSlice points at shop's reloader. The
    hub's call names bank (the policy's namespace), so shop's reloader refuses it."""
    await server.start(namespace="shop")
    result = await server.call(namespace="bank")
    assert not result.ok and "PERMISSION_DENIED" in result.message
    assert "serves namespace shop" in result.message and "meant for bank" in result.message
    assert not server.out.exists() and SECRET_VALUE not in result.message
    assert (await server.call(namespace="shop")).ok
