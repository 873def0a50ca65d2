"""Wire compatibility with KubeBlocks' config-manager (issue 24): stubs generated from
KubeBlocks' own ``reconfigure.proto`` (a fixture copy) call our reloader, and our caller
(the function ``fedctl run`` hands the rollout controller) calls a server generated from
it, both over real gRPC with mutual TLS on loopback.

KubeBlocks' generated messages have our message names, so they live in a child process
(one protobuf descriptor pool cannot hold both)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from federation.commands import reloader_ca
from federation.hub.rollouts import RELOADER_CLIENT_NAME
from federation.reloader import actions
from federation.reloader.client import UpgradeResult, online_upgrade
from federation.reloader.server import Reloader, ReloaderSettings, config_version
from federation.work import identity

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kubeblocks" / "reconfigure.proto"
RECORD = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"

# KubeBlocks' client, as its controller called the config-manager (configSpec, params,
# configFile; a non-empty errMessage is a failure), plus our namespace metadata.
CLIENT = """
import json, sys, grpc
import reconfigure_pb2 as pb, reconfigure_pb2_grpc as rpc
address, tls, namespace = sys.argv[1], sys.argv[2], sys.argv[3]
read = lambda name: open(f"{tls}/{name}", "rb").read()
credentials = grpc.ssl_channel_credentials(read("ca.crt"), read("client.key"), read("client.crt"))
options = [("grpc.ssl_target_name_override", "reloader.federation.io")]
with grpc.secure_channel(address, credentials, options=options) as channel:
    metadata = [("federation-namespace", namespace)] if namespace else []
    try:
        answer = rpc.ReconfigureStub(channel).OnlineUpgradeParams(pb.OnlineUpgradeParamsRequest(
            configSpec="mysql-config", params={"max_connections": "200"},
            configFile="my.cnf"), timeout=10, metadata=metadata)
        print(json.dumps({"errMessage": answer.errMessage}))
    except grpc.RpcError as error:
        print(json.dumps({"code": error.code().name}))
"""

# KubeBlocks' server side: records each request; fails as the Go config-manager did (a
# gRPC error from its handler) or with an errMessage, when asked to.
SERVER = """
import json, sys, grpc
from concurrent import futures
import reconfigure_pb2 as pb, reconfigure_pb2_grpc as rpc
tls, record, mode = sys.argv[1], sys.argv[2], sys.argv[3]
read = lambda name: open(f"{tls}/{name}", "rb").read()
class Servicer(rpc.ReconfigureServicer):
    def OnlineUpgradeParams(self, request, context):
        with open(record, "a") as out:
            out.write(json.dumps({"configSpec": request.configSpec, "params": dict(request.params),
                                  "configFile": request.configFile,
                                  "hasConfigFile": request.HasField("configFile")}) + "\\n")
        if mode == "error":
            context.abort(grpc.StatusCode.UNKNOWN, "failed to reload: exit status 1")
        return pb.OnlineUpgradeParamsResponse(
            errMessage="unsupported parameter" if mode == "errMessage" else "")
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
rpc.add_ReconfigureServicer_to_server(Servicer(), server)
credentials = grpc.ssl_server_credentials([(read("tls.key"), read("tls.crt"))],
                                          root_certificates=read("ca.crt"),
                                          require_client_auth=True)
port = server.add_secure_port("127.0.0.1:0", credentials)
server.start()
print(port, flush=True)
sys.stdin.read()
server.stop(0)
"""


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Python stubs generated from KubeBlocks' .proto, as a KubeBlocks user would."""
    pytest.importorskip("grpc_tools")
    out = tmp_path_factory.mktemp("kubeblocks-stubs")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{FIXTURE.parent}",
                    f"--python_out={out}", f"--grpc_python_out={out}", str(FIXTURE)],
                   check=True, capture_output=True)
    (out / "client.py").write_text(CLIENT)
    (out / "server.py").write_text(SERVER)
    return out


class Side:
    """One CA for both ends: server certificates under the reloaders' name, client
    certificates with the control plane's name (as ``fedctl run`` and the reloader use)."""

    def __init__(self, tmp: Path) -> None:
        self.tls = tmp / "tls"
        self.tls.mkdir()
        self.ca = identity.new_ca(common_name="federation-reloader-ca")
        cert, key = reloader_ca.server_certificate(self.ca)
        client = reloader_ca.client_tls_from(self.ca)
        for name, data in (("tls.crt", cert), ("tls.key", key), ("ca.crt", self.ca.cert_pem),
                           ("client.crt", client.cert_pem), ("client.key", client.key_pem)):
            (self.tls / name).write_bytes(data)
        self.client = client
        self.reloader: Reloader | None = None


@pytest_asyncio.fixture(loop_scope="function")  # grpc.aio binds to the test's loop
async def side(tmp_path: Path) -> AsyncIterator[Side]:
    fixture = Side(tmp_path)
    try:
        yield fixture
    finally:
        if fixture.reloader is not None:
            await fixture.reloader.stop(0)


async def start_reloader(side: Side, tmp: Path, command: list[str]) -> str:
    config = tmp / "config"
    config.mkdir()
    (config / "my.cnf").write_text("[mysqld]\nmax_connections=100\n")
    side.reloader = Reloader(ReloaderSettings(
        config_dir=config, action=actions.parse({"kind": "exec", "command": command}),
        tls_cert=side.tls / "tls.crt", tls_key=side.tls / "tls.key",
        tls_ca=side.tls / "ca.crt", allowed_clients=(RELOADER_CLIENT_NAME,),
        namespace="shop"))
    await side.reloader.scan()
    return f"127.0.0.1:{await side.reloader.start('127.0.0.1:0')}"


async def kubeblocks_client(stubs: Path, address: str, side: Side, namespace: str
                            ) -> dict[str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(stubs / "client.py"), address, str(side.tls), namespace,
        cwd=stubs, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    answer: dict[str, str] = json.loads(out)
    return answer


async def test_kubeblocks_client_calls_our_reloader(stubs: Path, side: Side,
                                                    tmp_path: Path) -> None:
    """KubeBlocks' generated client reaches the action with its own field numbers."""
    out = tmp_path / "argv.json"
    address = await start_reloader(side, tmp_path, [sys.executable, "-c", RECORD, str(out)])
    assert await kubeblocks_client(stubs, address, side, "shop") == {"errMessage": ""}
    assert json.loads(out.read_text()) == ["max_connections=200"]


async def test_kubeblocks_client_reads_a_failed_action_as_an_err_message(
        stubs: Path, side: Side, tmp_path: Path) -> None:
    address = await start_reloader(side, tmp_path,
                                   [sys.executable, "-c", "import sys; sys.exit(3)"])
    answer = await kubeblocks_client(stubs, address, side, "shop")
    assert "exited with status 3" in answer["errMessage"]


async def test_kubeblocks_client_without_our_namespace_is_refused(
        stubs: Path, side: Side, tmp_path: Path) -> None:
    """Our namespace rule stays on top of KubeBlocks' protocol: a call that does not say
    which namespace it is meant for runs nothing."""
    out = tmp_path / "argv.json"
    address = await start_reloader(side, tmp_path, [sys.executable, "-c", RECORD, str(out)])
    assert await kubeblocks_client(stubs, address, side, "") == {"code": "PERMISSION_DENIED"}
    assert await kubeblocks_client(stubs, address, side, "bank") == {
        "code": "PERMISSION_DENIED"}
    assert not out.exists()


class KubeBlocksServer:
    def __init__(self, stubs: Path, side: Side, record: Path) -> None:
        self.stubs, self.side, self.record = stubs, side, record
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, mode: str) -> str:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, str(self.stubs / "server.py"), str(self.side.tls),
            str(self.record), mode, cwd=self.stubs, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE)
        assert self.process.stdout is not None
        port = int(await asyncio.wait_for(self.process.stdout.readline(), timeout=60))
        return f"127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    def requests(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.mark.parametrize(("mode", "expected"), [
    ("ok", (True, "")),
    ("errMessage", (False, "unsupported parameter")),
    ("error", (False, "refused the call: UNKNOWN: failed to reload: exit status 1")),
])
async def test_our_caller_drives_a_server_generated_from_kubeblocks_proto(
        stubs: Path, side: Side, tmp_path: Path, mode: str, expected: tuple[bool, str]
        ) -> None:
    server = KubeBlocksServer(stubs, side, tmp_path / "requests.jsonl")
    try:
        address = await server.start(mode)
        result = await online_upgrade(address, side.client, namespace="shop",
                                      config_spec="mysql-config", config_file="my.cnf",
                                      params={"max_connections": "200"}, timeout=30)
    finally:
        await server.stop()
    assert result.ok is expected[0] and expected[1] in result.message
    assert result.config_version == ""  # a KubeBlocks server has no such field
    assert server.requests() == [{"configSpec": "mysql-config",
                                  "params": {"max_connections": "200"},
                                  "configFile": "my.cnf", "hasConfigFile": True}]


async def test_our_reloader_answers_our_caller_with_its_version(
        side: Side, tmp_path: Path) -> None:
    """Our additions (fields 100 and up) still reach our own caller."""
    out = tmp_path / "argv.json"
    address = await start_reloader(side, tmp_path, [sys.executable, "-c", RECORD, str(out)])
    result = await online_upgrade(address, side.client, namespace="shop",
                                  config_spec="mysql-config", config_file="my.cnf",
                                  params={"max_connections": "200"}, timeout=30)
    assert result == UpgradeResult(True, "", config_version(tmp_path / "config"))
