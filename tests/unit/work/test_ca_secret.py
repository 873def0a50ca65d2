"""The CA Secret helpers keyed by Secret name (work CA by default, the reloaders' CA by
name), and the reloader certificates issued from it."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from federation.commands import reloader_ca
from federation.contexts.client import JSON, ApiError, ObjectClient, Resource
from federation.hub.rollouts import (
    RELOADER_CA_SECRET,
    RELOADER_CLIENT_NAME,
    RELOADER_SERVER_NAME,
)
from federation.work import identity
from tests.unit.clients import Unserved


class FakeHub(Unserved):
    """get/create of Secrets and Namespaces, as a hub API server answers them."""

    name = "hub"

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], JSON] = {}
        self.creates = 0

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        try:
            return self.objects[(resource.plural, namespace or "", name)]
        except KeyError:
            raise ApiError("hub", 404, "NotFound", f"{name} not found") from None

    async def create(self, resource: Resource, body: JSON,
                     namespace: str | None = None) -> JSON:
        meta = body["metadata"]
        key = (resource.plural, meta.get("namespace", ""), meta["name"])
        if key in self.objects:
            raise ApiError("hub", 409, "AlreadyExists", "exists")
        self.creates += 1
        self.objects[key] = body
        return body


def hub(fake: FakeHub) -> ObjectClient:
    return fake


def _cn(cert: x509.Certificate | x509.Name) -> list[Any]:
    name = cert.subject if isinstance(cert, x509.Certificate) else cert
    return [a.value for a in name.get_attributes_for_oid(NameOID.COMMON_NAME)]


async def test_two_cas_in_two_secrets_do_not_mix() -> None:
    fake = FakeHub()
    work = await identity.ensure_ca(hub(fake))
    reloaders = await identity.ensure_ca(hub(fake), RELOADER_CA_SECRET)
    assert work.cert_pem != reloaders.cert_pem
    assert _cn(work.cert) == ["federation-work-ca"]
    assert _cn(reloaders.cert) == [RELOADER_CA_SECRET]
    assert set(fake.objects) == {("namespaces", "", "federation-system"),
                                 ("secrets", "federation-system", "federation-work-ca"),
                                 ("secrets", "federation-system", RELOADER_CA_SECRET)}
    # Ensuring again reads what is there: no second CA.
    again = await identity.ensure_ca(hub(fake), RELOADER_CA_SECRET)
    assert again == reloaders and fake.creates == 3
    assert await identity.load_ca(hub(fake), RELOADER_CA_SECRET) == reloaders


async def test_a_missing_secret_is_named_and_load_never_creates() -> None:
    fake = FakeHub()
    with pytest.raises(identity.CAMissing, match=f"federation-system/{RELOADER_CA_SECRET} "):
        await identity.load_ca(hub(fake), RELOADER_CA_SECRET)
    with pytest.raises(identity.CAMissing, match="fedctl join NAME --mode pull"):
        await identity.load_ca(hub(fake))
    assert fake.objects == {}


async def test_a_broken_secret_is_refused_naming_it_and_not_replaced() -> None:
    fake = FakeHub()
    broken = identity.ca_secret(identity.new_ca(), RELOADER_CA_SECRET)
    broken["data"]["tls.key"] = "bm90IGEga2V5"  # "not a key"
    fake.objects[("secrets", "federation-system", RELOADER_CA_SECRET)] = broken
    with pytest.raises(identity.IdentityError,
                       match=f"Secret federation-system/{RELOADER_CA_SECRET}: tls.crt"):
        await identity.ensure_ca(hub(fake), RELOADER_CA_SECRET)
    assert fake.creates == 0


async def test_a_concurrent_creator_wins_and_its_ca_is_used() -> None:
    fake = FakeHub()
    theirs = identity.new_ca()
    original_get = fake.get
    calls = 0

    async def racing_get(resource: Resource, name: str, namespace: str | None = None) -> JSON:
        nonlocal calls
        calls += 1
        if calls == 1:  # the other caller creates it between our read and our create
            fake.objects[("secrets", "federation-system", name)] = \
                identity.ca_secret(theirs, name)
            raise ApiError("hub", 404, "NotFound", "not found")
        return await original_get(resource, name, namespace)

    fake.get = racing_get  # type: ignore[method-assign]
    assert await identity.ensure_ca(hub(fake), RELOADER_CA_SECRET) == theirs


def test_the_reloader_server_certificate_names_the_reloader_service() -> None:
    ca = identity.new_ca(common_name=RELOADER_CA_SECRET)
    cert_pem, key_pem = reloader_ca.server_certificate(ca)
    cert = x509.load_pem_x509_certificate(cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [RELOADER_SERVER_NAME]
    assert sans.get_values_for_type(x509.IPAddress) == []
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.issuer == ca.cert.subject and b"PRIVATE KEY" in key_pem


def test_the_controller_client_certificate_is_client_auth_named_exactly() -> None:
    ca = identity.new_ca(common_name=RELOADER_CA_SECRET)
    tls = reloader_ca.client_tls_from(ca)
    cert = x509.load_pem_x509_certificate(tls.cert_pem)
    assert _cn(cert) == [RELOADER_CLIENT_NAME]
    # No organisation: never read as an agent (federation:agents) by the work server.
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == []
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert tls.ca_pem == ca.cert_pem


async def test_client_tls_reads_the_hub_ca_and_server_files_make_it(tmp_path: Any) -> None:
    fake = FakeHub()
    with pytest.raises(identity.CAMissing):
        await reloader_ca.client_tls(hub(fake))
    paths = await reloader_ca.server_files(hub(fake), tmp_path / "tls")
    assert paths["key"].stat().st_mode & 0o077 == 0
    tls = await reloader_ca.client_tls(hub(fake))
    assert paths["ca"].read_bytes() == tls.ca_pem
    assert identity.common_name(paths["cert"].read_bytes()) == "federation-reloader"
