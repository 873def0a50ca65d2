"""The caller's side of ``Reconfigure``: one ``OnlineUpgradeParams`` call to one reloader.

The rollout controller calls each reloader of a workload with the changed dynamic
parameters. Controllers may not import this package (the layers put the reloader above
them), so ``fedctl run`` hands :func:`online_upgrade` to the controller, which declares
the same call shape as a Protocol and uses a fake in its unit tests.

Every call opens its own channel with mutual TLS: the client certificate in
:class:`ClientTLS` (CN ``federation-reconfigure``, signed by the reloaders' CA) and the
server verified against that CA under the name :data:`SERVER_NAME`, whatever address the
EndpointSlice gave (reloaders live at pod addresses no certificate could name in advance,
so every reloader certificate carries that one name). A call is bounded by ``timeout``
seconds, handshake included. Two outcomes are kept apart, because a rollout reports them
differently:

- the reloader answered: :class:`UpgradeResult` (``ok`` False when the action failed,
  or when the reloader refused the caller or the call, with its reason);
- no answer: :class:`ReloaderUnreachable` (connection refused, a handshake that fails, for
  instance a server certificate from another CA, or the deadline passing). The action
  may or may not have run when the deadline passes; it never ran on a failed handshake.

Messages name the address and the gRPC status; never a parameter value nor key material.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import grpc
import grpc.aio

from federation.reloader import NAMESPACE_HEADER
from federation.reloader.proto import config_manager_pb2 as pb

ONLINE_UPGRADE = "/proto.Reconfigure/OnlineUpgradeParams"
"""KubeBlocks' config-manager RPC: our reloader serves it, and so did KubeBlocks' own
config-manager sidecar (which answers a failed reload with a gRPC error rather than an
``errMessage``; both are a refused call here)."""
SERVER_NAME = "reloader.federation.io"
"""The name verified in every reloader's certificate; equal to
``federation.hub.rollouts.RELOADER_SERVER_NAME`` (a unit test holds them together:
the reloader may not import the hub package)."""
MAX_DETAIL = 300
"""Characters of a gRPC error's details kept in a message: enough for the reason, not
enough to turn a failure report into a dump."""

_ANSWERED = frozenset({grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED,
                       grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                       grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNKNOWN})
"""Status codes a reloader's server sends itself: it was reached and said no. UNKNOWN is
what a Go gRPC server (KubeBlocks' config-manager) sends when its handler returns a plain
error, as it does for a failed reload."""


@dataclasses.dataclass(frozen=True)
class ClientTLS:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def __repr__(self) -> str:  # the key must never reach a log through a repr
        return "ClientTLS(<pem>)"


@dataclasses.dataclass(frozen=True)
class UpgradeResult:
    ok: bool
    message: str
    """Empty when ok; else why (the action's error or the reloader's refusal)."""
    config_version: str
    """The reloader's config directory version after the call ("" if it refused)."""


class ReloaderUnreachable(Exception):
    """No answer from the reloader at an address (transport, handshake or deadline)."""


def _detail(error: grpc.aio.AioRpcError) -> str:
    detail = (error.details() or "").strip().replace("\n", " ")
    return detail[:MAX_DETAIL]


async def online_upgrade(address: str, tls: ClientTLS, *, namespace: str, config_spec: str,
                         config_file: str, params: Mapping[str, str], timeout: float
                         ) -> UpgradeResult:
    """Call ``OnlineUpgradeParams`` on the reloader at ``address`` (host:port), meant for a
    workload of ``namespace`` (sent as :data:`NAMESPACE_HEADER`: a reloader of another
    namespace refuses the call)."""
    credentials = grpc.ssl_channel_credentials(tls.ca_pem, tls.key_pem, tls.cert_pem)
    options = [("grpc.ssl_target_name_override", SERVER_NAME),
               ("grpc.default_authority", SERVER_NAME)]
    request = pb.OnlineUpgradeParamsRequest(config_spec=config_spec, config_file=config_file,
                                            params=dict(params))
    try:
        async with grpc.aio.secure_channel(address, credentials, options=options) as channel:
            method = channel.unary_unary(
                ONLINE_UPGRADE,
                request_serializer=pb.OnlineUpgradeParamsRequest.SerializeToString,
                response_deserializer=pb.OnlineUpgradeParamsResponse.FromString)
            answer: pb.OnlineUpgradeParamsResponse = await method(
                request, timeout=timeout, wait_for_ready=False,
                metadata=((NAMESPACE_HEADER, namespace),))
    except grpc.aio.AioRpcError as error:
        code = error.code()
        if code in _ANSWERED:
            return UpgradeResult(False, f"reloader at {address} refused the call: "
                                        f"{code.name}: {_detail(error)}", "")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise ReloaderUnreachable(f"reloader at {address}: no answer within "
                                      f"{timeout:g}s") from None
        raise ReloaderUnreachable(f"reloader at {address}: {code.name}: {_detail(error)}"
                                  ) from None
    # KubeBlocks' only answer field is errMessage: empty means the reload worked.
    return UpgradeResult(not answer.err_message, answer.err_message, answer.config_version)
