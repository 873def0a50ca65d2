"""The attack on discovery: an EndpointSlice (member data) pointing the rollout at a TLS
server that is not a reloader, such as a member's API server. The handshake fails, the
cluster fails naming the address, and not one byte of the call (the parameter values)
reaches that server. Real TLS on loopback, through ``fedctl run``'s caller."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from federation.commands import reloader_ca
from federation.commands.run import ReloaderCaller
from federation.work import identity
from tests.unit.controllers.rollouts.fakes import (
    INI_V1,
    Fleet,
    change,
    reconcile,
    reconciler,
    standard,
)

SECRET = "max-connections-4242"


class ApiServerLike:
    """A TLS server with its own CA (as every member API server has), recording what it
    receives after a handshake."""

    def __init__(self, tmp: Path, names: list[str]) -> None:
        ca = identity.new_ca(common_name="member-apiserver-ca")
        cert, key = identity.issue_server(ca, names, common_name="kube-apiserver")
        (tmp / "tls.crt").write_bytes(cert)
        (tmp / "tls.key").write_bytes(key)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
        self.received: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while data := await reader.read(65536):
                self.received.append(data)
        except (ssl.SSLError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        self.port = self.server.sockets[0].getsockname()[1]


@pytest_asyncio.fixture
async def impostor(tmp_path: Path) -> AsyncIterator[ApiServerLike]:
    # The impostor even claims the reloaders' name: only the CA tells them apart.
    server = ApiServerLike(tmp_path, ["reloader.federation.io", "127.0.0.1"])
    await server.start()
    yield server
    assert server.server is not None
    server.server.close()
    await server.server.wait_closed()


@pytest.mark.timeout(60)
async def test_an_endpoint_slice_pointing_at_another_tls_server_gets_nothing(
        impostor: ApiServerLike) -> None:
    caller = ReloaderCaller()
    caller.tls = reloader_ca.client_tls_from(
        identity.new_ca(common_name="federation-reloader-ca"))
    fleet = Fleet(("member1",))
    standard(fleet)
    fleet.endpoints("member1", "127.0.0.1", port=impostor.port)
    rec = reconciler(fleet, caller, call_timeout=5.0)
    await reconcile(rec)
    change(fleet, INI_V1.replace("max_connections = 100", f"max_connections = {SECRET}"))
    fleet.hub[("ConfigConstraint", "", "mysql")]["spec"]["parametersSchema"] = {}
    await reconcile(rec)
    fleet.propagate()
    await reconcile(rec)
    status = fleet.status()
    assert fleet.states() == {"member1": "Failed"}
    message = status["clusters"][0]["message"]
    assert message.startswith(f"ReloaderFailed: Deployment db reloader 127.0.0.1:"
                              f"{impostor.port} (my.ini)")
    await asyncio.sleep(0)  # let the server's handler see the connection end
    assert b"".join(impostor.received) == b""  # the handshake failed: nothing was sent
    assert SECRET not in str(status)


async def test_without_a_ca_the_caller_refuses_rather_than_dial() -> None:
    caller = ReloaderCaller()
    with pytest.raises(RuntimeError, match="not loaded"):
        await caller("127.0.0.1:1", namespace="shop", config_spec="c", config_file="f",
                     params={"a": "1"}, timeout=1.0)
