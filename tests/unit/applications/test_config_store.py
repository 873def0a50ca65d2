"""vela-core's config-store steps (``create-config``, ``read-config``, ``list-config``,
``delete-config``), narrowed for a tenant: Secrets of the Application's own hub namespace
carrying the store's label only. Each attack test fails on a naive step that reads,
writes or deletes the Secret its properties name (KubeVela's provider adopts an unlabelled
Secret on create and reads any Secret on read)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from federation.applications import compile as compile_
from federation.applications import config_store, model
from federation.commands.app import _what_it_does
from federation.contexts.client import Resource
from federation.contexts.scoped import NotGranted
from federation.placement import clusters as clusters_
from tests.unit.applications.test_controller import MC, REQUEST, Clock, must, set_app
from tests.unit.applications.test_controller_workflow_io import without_nulls
from tests.unit.controllers import fakes
from tests.unit.controllers.applications import fakes as app_fakes

JSON = dict[str, Any]
FLEET = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
VALUE = "s3cr3t-db-password"
"""A config value that must never reach a message, an Event or a condition."""


def step(type_: str, name: str = "db", **props: Any) -> JSON:
    properties: JSON = {"name": name, **props} if type_ != "list-config" else props
    return {"name": type_, "type": type_, "properties": properties}


def compiled(*steps: JSON) -> compile_.Compiled:
    spec = {"components": [{"name": "web", "type": "config", "properties": {"data": {}}}],
            "workflow": {"steps": list(steps)}}
    return compile_.compile_app(spec, "shop", "shop", {}, FLEET, local_cluster="member1")


def refusal(*steps: JSON) -> str:
    with pytest.raises(model.AppError) as caught:
        compiled(*steps)
    return str(caught.value)


# -- what each step takes -------------------------------------------------------------------


def test_each_step_is_checked_into_what_the_controller_does() -> None:
    result = compiled(step("create-config", config={"host": "db", "port": 5432}),
                      step("read-config"), step("list-config", template="mysql"),
                      step("delete-config"))
    assert result.stores["create-config"] == config_store.StoreStep(
        "create", "db", config={"host": "db", "port": 5432})
    assert result.stores["read-config"] == config_store.StoreStep("read", "db")
    assert result.stores["list-config"] == config_store.StoreStep("list", template="mysql")
    assert result.stores["delete-config"] == config_store.StoreStep("delete", "db")
    said = _what_it_does(result, result.steps[0])
    assert "writes config db (2 key(s))" in said and "5432" not in said


@pytest.mark.parametrize(("bad", "words"), [
    (step("create-config", namespace="bank", config={}), "properties.namespace: not supported"),
    (step("read-config", namespace="bank"), "properties.namespace: not supported"),
    (step("delete-config", namespace="kube-system"), "properties.namespace: not supported"),
    (step("list-config", namespace="bank", template="t"), "properties.namespace: not supported"),
    (step("create-config", template="image-registry", config={}),
     "properties.template: not supported"),
    (step("list-config", template="vela-system/helm"), "properties.template: a template's"),
    (step("list-config", template=""), "properties.template: a template name"),
    (step("read-config", name="../kube-system/x"), "properties.name: not a Kubernetes"),
    (step("create-config", name="Db", config={}), "properties.name: not a Kubernetes"),
    (step("create-config"), "properties.config: required"),
    (step("create-config", config=[VALUE]), "properties.config: must be a map"),
    (step("create-config", config={f"k{i}": VALUE for i in range(65)}),
     "65 keys; a config holds at most 64"),
    (step("create-config", config={"blob": VALUE * 2000}), "a config holds at most 32768"),
    (step("read-config", extra=VALUE), "properties.extra: not supported"),
])
def test_refused_by_name_and_no_value_quoted(bad: JSON, words: str) -> None:
    message = refusal(bad)
    assert words in message
    assert VALUE not in message


# -- on the in-memory fleet --------------------------------------------------------------------


def store_secret(name: str, properties: JSON, namespace: str = "shop", template: str = "",
                 **annotations: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {config_store.CATALOG_LABEL: config_store.CATALOG,
                                    config_store.TYPE_LABEL: template},
                         "annotations": annotations},
            "data": {"input-properties": base64.b64encode(json.dumps(properties).encode())
                     .decode()}}


def plain_secret(name: str = "db", namespace: str = "shop") -> JSON:
    """Someone's Secret that is not a config: a tenant who may not read it must learn
    nothing of it through the store."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"password": base64.b64encode(VALUE.encode()).decode()}}


def application(*steps: JSON, components: list[JSON] | None = None) -> JSON:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "shop", "annotations": {}},
            "spec": {"components": components or [
                {"name": "web", "type": "config", "properties": {"data": {"a": "b"}}}],
                "workflow": {"steps": list(steps)}}}


async def run(mc: MC, app: JSON, times: int = 10) -> tuple[JSON, app_fakes.Recorder]:
    clock = Clock()
    set_app(mc, app)
    recorder = app_fakes.Recorder()
    status: JSON = {}
    for _ in range(times):
        reconciler = app_fakes.reconciler(mc, recorder, clock=clock)
        await reconciler.reconcile(REQUEST)
        live = mc.find("hub", "Application", "shop", "shop")
        assert live is not None
        live["status"] = without_nulls(live["status"])
        mc.put("hub", live)
        status = live["status"]
        clock.now += 5
        if status.get("workflow", {}).get("phase") in ("succeeded", "failed"):
            break
    return status, recorder


def steps_of(status: JSON) -> dict[str, JSON]:
    return {s["name"]: s for s in status["workflow"]["steps"]}


def told(status: JSON, recorder: app_fakes.Recorder) -> str:
    """Everything a reader of the Application's messages sees: its steps' messages, its
    conditions and its Events (not the outputs' values, which the steps declared)."""
    steps = [{k: v for k, v in s.items() if k in ("name", "phase", "reason", "message")}
             for s in status.get("workflow", {}).get("steps", [])]
    return json.dumps([steps, status.get("conditions"), recorder.events])


FLOW = application(
    step("create-config", config={"host": "db.shop", "password": VALUE}),
    {**step("read-config"), "outputs": [{"name": "db", "valueFrom": "output.$returns.config"}]},
    {"name": "deploy", "type": "apply-component",
     "properties": {"component": "web", "cluster": "member2"},
     "inputs": [{"from": "db.host", "parameterKey": "properties.data.host"}]},
    step("delete-config"))


async def test_create_read_use_and_delete_a_config() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    status, recorder = await run(mc, FLOW, 16)
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    steps = steps_of(status)
    assert [steps[n]["reason"] for n in ("create-config", "read-config", "delete-config")] == \
        ["Written", "Read", "Deleted"]
    assert must(mc, "member2", "ConfigMap", "web")["data"] == {"a": "b", "host": "db.shop"}
    assert mc.find("hub", "Secret", "db", "shop") is None  # deleted by the last step
    assert steps["delete-config"]["message"] == "config deleted"
    reasons = [e[1] for e in recorder.events]
    assert "ConfigWritten" in reasons and "ConfigDeleted" in reasons
    assert VALUE not in told(status, recorder)


async def test_the_written_secret_is_kubeveals_layout_with_our_mark() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    await run(mc, application(step("create-config", config={"k": 1})))
    written = must(mc, "hub", "Secret", "db")
    assert written["metadata"]["labels"] == {config_store.CATALOG_LABEL: config_store.CATALOG,
                                             config_store.TYPE_LABEL: ""}
    assert written["metadata"]["annotations"][config_store.WRITTEN_BY] == "shop/shop"
    assert json.loads(base64.b64decode(written["data"]["input-properties"])) == {"k": 1}


async def test_a_changed_config_updates_the_store_secret_in_place() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", store_secret("db", {"k": "old"}))
    uid = must(mc, "hub", "Secret", "db")["metadata"]["uid"]
    status, _ = await run(mc, application(step("create-config", config={"k": "new"})))
    assert status["workflow"]["phase"] == "succeeded"
    written = must(mc, "hub", "Secret", "db")
    assert written["metadata"]["uid"] == uid
    assert json.loads(base64.b64decode(written["data"]["input-properties"])) == {"k": "new"}


async def test_create_never_overwrites_a_secret_the_store_did_not_write() -> None:
    """The attack: name another Secret of the namespace (a database password the tenant
    may not read) to overwrite it with the tenant's values (KubeVela would)."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", plain_secret())
    before = copy.deepcopy(must(mc, "hub", "Secret", "db"))
    status, recorder = await run(mc, application(step("create-config", config={"p": "x"})))
    create = steps_of(status)["create-config"]
    assert (create["phase"], create["reason"]) == ("failed", "Execute")
    assert "is not a config of the store" in create["message"]
    assert must(mc, "hub", "Secret", "db") == before
    assert VALUE not in told(status, recorder)


async def test_create_never_changes_a_configs_template() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", store_secret("db", {"url": "x"}, template="helm-repository"))
    before = copy.deepcopy(must(mc, "hub", "Secret", "db"))
    status, _ = await run(mc, application(step("create-config", config={"p": "x"})))
    assert "its template cannot be changed" in steps_of(status)["create-config"]["message"]
    assert must(mc, "hub", "Secret", "db") == before


async def test_a_non_store_secret_reads_as_a_missing_config() -> None:
    """The attack: read-config of another Secret of the namespace into an output (the
    status) or a component. The answer is the one a missing config gets, word for word,
    and nothing of the Secret is anywhere."""
    read = {**step("read-config"), "outputs": [{"name": "v", "valueFrom": "output.config"}]}
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", plain_secret())
    status, recorder = await run(mc, application(read))
    absent, _ = await run(MC(fakes.cluster_set(*fakes.MEMBERS)), application(read))
    message = steps_of(status)["read-config"]["message"]
    assert steps_of(status)["read-config"]["phase"] == "failed"
    assert message == steps_of(absent)["read-config"]["message"] == \
        "no config db in the store of this namespace"
    assert VALUE not in json.dumps(status) and VALUE not in json.dumps(recorder.events)


async def test_delete_of_a_non_store_secret_deletes_nothing_and_says_what_a_missing_one_says(
        ) -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", plain_secret())
    before = copy.deepcopy(must(mc, "hub", "Secret", "db"))
    status, _ = await run(mc, application(step("delete-config")))
    absent, _ = await run(MC(fakes.cluster_set(*fakes.MEMBERS)),
                          application(step("delete-config")))
    assert must(mc, "hub", "Secret", "db") == before
    assert steps_of(status)["delete-config"]["message"] == \
        steps_of(absent)["delete-config"]["message"]
    assert not any(w[1] == "Secret" for w in mc.writes if w[0] == "hub")


async def test_another_namespaces_config_is_neither_read_nor_written() -> None:
    """The attack: shop's Application names bank's store. Refused before anything is read
    (renderFailed), bank's config unchanged."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", store_secret("db", {"password": VALUE}, namespace="bank"))
    before = copy.deepcopy(must_in(mc, "bank"))
    app = application(step("read-config", namespace="bank"),
                      step("create-config", namespace="bank", config={"password": "mine"}))
    status, recorder = await run(mc, app, 2)
    assert status["status"] == "renderFailed"
    assert "properties.namespace: not supported" in json.dumps(status["conditions"])
    assert must_in(mc, "bank") == before
    assert VALUE not in json.dumps(status) and VALUE not in json.dumps(recorder.events)


def must_in(mc: MC, namespace: str) -> JSON:
    found = mc.find("hub", "Secret", "db", namespace)
    assert found is not None
    return found


async def test_a_sensitive_config_is_never_read_and_listed_without_its_values() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", store_secret("db", {"password": VALUE}, template="mysql",
                               **{config_store.SENSITIVE: "true"}))
    mc.put("hub", store_secret("other", {"host": "h"}, template="mysql"))
    mc.put("hub", store_secret("elsewhere", {"host": "h"}, namespace="bank", template="mysql"))
    listing = {**step("list-config", template="mysql"),
               "outputs": [{"name": "all", "valueFrom": "output.$returns.configs"}]}
    status, recorder = await run(mc, application(listing, step("read-config")))
    assert steps_of(status)["read-config"]["phase"] == "failed"
    assert "sensitive" in steps_of(status)["read-config"]["message"]
    values = dict(status["workflow"]["_state"]["values"])
    assert json.loads(values["all"]) == [
        {"name": "db", "alias": "", "description": "", "config": None},
        {"name": "other", "alias": "", "description": "", "config": {"host": "h"}}]
    assert VALUE not in json.dumps(status) and VALUE not in json.dumps(recorder.events)


async def test_list_lists_store_secrets_of_the_template_only() -> None:
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    labelled = plain_secret("fake")
    labelled["metadata"]["labels"] = {config_store.TYPE_LABEL: "mysql"}  # no catalog label
    mc.put("hub", labelled)
    mc.put("hub", store_secret("one", {"a": 1}, template="mysql"))
    mc.put("hub", store_secret("two", {"a": 2}, template="redis"))
    listing = {**step("list-config", template="mysql"),
               "outputs": [{"name": "names", "valueFrom": "[for c in output.configs {c.name}]"}]}
    status, _ = await run(mc, application(listing))
    assert status["workflow"]["phase"] == "succeeded", status["workflow"]
    assert json.loads(dict(status["workflow"]["_state"]["values"])["names"]) == ["one"]


class Ungranted(MC):
    """The hub's Secret cache where the namespace's Secrets are not granted."""

    async def view(self, resource: Resource, name: str, namespace: str | None = None, *,
                   cluster: str, allow_stale: bool = False) -> Any:
        if resource.kind == "Secret":
            raise NotGranted(cluster, f"Secrets of namespace {namespace} are not readable")
        return await super().view(resource, name, namespace, cluster=cluster)


async def test_an_ungranted_namespace_waits_and_writes_nothing() -> None:
    mc = Ungranted(fakes.cluster_set(*fakes.MEMBERS))
    status, _ = await run(mc, application(step("create-config", config={"a": 1})), 3)
    create = steps_of(status)["create-config"]
    assert (create["phase"], create["reason"]) == ("running", "Wait")
    assert "not readable" in create["message"]
    assert mc.find("hub", "Secret", "db", "shop") is None


async def test_a_failed_write_is_retried_and_never_reported_done() -> None:
    """A Secret of that name appears between the read and the create (409): the step
    keeps running, the problem names no value, and the other Secret is kept."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    app = application(step("create-config", config={"password": VALUE}))
    set_app(mc, app)
    reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=Clock())
    original = mc.cluster

    def racing(name: str) -> Any:
        writer = original(name)
        create = writer.create

        async def raced(obj: JSON, **kw: Any) -> JSON:
            if obj.get("kind") == "Secret" and name == "hub":
                mc.put("hub", plain_secret())
            return await create(obj, **kw)
        writer.create = raced  # type: ignore[method-assign]
        return writer
    mc.cluster = racing  # type: ignore[method-assign]
    await reconciler.reconcile(REQUEST)
    live = mc.find("hub", "Application", "shop", "shop")
    assert live is not None
    create = steps_of(live["status"])["create-config"]
    assert create["phase"] == "running"
    assert base64.b64decode(must(mc, "hub", "Secret", "db")["data"]["password"]).decode() == VALUE
    assert VALUE not in json.dumps(live["status"])


async def test_a_delete_never_takes_a_secret_put_in_the_configs_place() -> None:
    """Between the read of the store Secret and its delete, someone replaces it with a
    Secret that is not a config: the delete carries the version read (UID and
    resourceVersion), so it fails and the new Secret is kept."""
    mc = MC(fakes.cluster_set(*fakes.MEMBERS))
    mc.put("hub", store_secret("db", {"k": 1}))
    set_app(mc, application(step("delete-config")))
    reconciler = app_fakes.reconciler(mc, app_fakes.Recorder(), clock=Clock())
    original = mc.cluster

    def racing(name: str) -> Any:
        writer = original(name)
        delete = writer.delete

        async def raced(resource: Resource, *args: Any, **kw: Any) -> JSON:
            if resource.kind == "Secret" and name == "hub":
                mc.put("hub", plain_secret())
            return await delete(resource, *args, **kw)
        writer.delete = raced  # type: ignore[method-assign]
        return writer
    mc.cluster = racing  # type: ignore[method-assign]
    await reconciler.reconcile(REQUEST)
    live = mc.find("hub", "Application", "shop", "shop")
    assert live is not None
    assert steps_of(live["status"])["delete-config"]["phase"] == "running"
    kept = must(mc, "hub", "Secret", "db")
    assert base64.b64decode(kept["data"]["password"]).decode() == VALUE
