"""`fedctl run`'s reloader caller: its client certificate comes from the hub's reloader CA
(made when missing and allowed), and without one every call fails saying why."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from federation.commands.run import ReloaderCaller
from federation.contexts.client import JSON, ApiError, Resource
from federation.hub.rollouts import RELOADER_CA_SECRET, RELOADER_CLIENT_NAME
from federation.work import identity
from tests.unit.work.test_ca_secret import FakeHub


class ReadOnlyHub(FakeHub):
    """The least-privilege control plane: it may read the Secret, never create it."""

    async def create(self, resource: Resource, body: JSON,
                     namespace: str | None = None) -> JSON:
        raise ApiError("hub", 403, "Forbidden", f"cannot create {resource.plural}")


async def test_prepare_issues_the_client_certificate_from_the_reloader_ca() -> None:
    fake = FakeHub()
    caller = ReloaderCaller()
    await caller.prepare(fake)
    assert caller.tls is not None
    cert = x509.load_pem_x509_certificate(caller.tls.cert_pem)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
        RELOADER_CLIENT_NAME]
    ca = await identity.load_ca(fake, RELOADER_CA_SECRET)
    assert caller.tls.ca_pem == ca.cert_pem  # the reloaders' CA, not the work CA
    assert "PRIVATE KEY" not in repr(caller.tls)


async def test_without_rights_to_make_the_ca_online_steps_fail_naming_it(
        caplog: pytest.LogCaptureFixture) -> None:
    caller = ReloaderCaller()
    await caller.prepare(ReadOnlyHub())
    assert caller.tls is None
    assert f"federation-system/{RELOADER_CA_SECRET}" in caplog.text
    with pytest.raises(RuntimeError, match=RELOADER_CA_SECRET):
        await caller("127.0.0.1:1", namespace="shop", config_spec="c", config_file="f",
                     params={"a": "1"}, timeout=1.0)
