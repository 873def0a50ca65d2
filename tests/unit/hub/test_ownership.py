"""Field ownership: which fields of a member's object another field manager owns."""

from typing import Any

from federation.hub import ownership

JSON = dict[str, Any]


def entry(manager: str, fields: JSON, operation: str = "Update") -> JSON:
    return {"manager": manager, "operation": operation, "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1", "fieldsV1": fields}


LIVE: JSON = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "labels": {"app": "web"}},
              "spec": {"replicas": 7, "template": {"spec": {"containers": [
                  {"name": "web", "image": "nginx"}, {"name": "proxy", "image": "envoy"}]}}}}
OURS = entry("fedctl", {"f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:template": {"f:spec": {"f:containers": {
                            'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}}}}}})
HPA = entry("hpa", {"f:spec": {"f:replicas": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
SIDECAR = entry("injector", {"f:spec": {"f:template": {"f:spec": {"f:containers": {
    'k:{"name":"proxy"}': {".": {}, "f:image": {}, "f:name": {}},
    'k:{"name":"web"}': {"f:env": {}}}}}}})


def test_a_field_only_another_manager_owns_is_theirs() -> None:
    found = ownership.foreign([OURS, HPA, SIDECAR])
    pointers = sorted(p for path in found if (p := ownership.pointer(LIVE, path)))
    assert pointers == ["/spec/replicas", "/spec/template/spec/containers/1"]
    # A field of our container they added (env) is theirs; the container itself is shared.
    assert ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}',
            "f:env") in found


def test_metadata_is_always_ours_and_shared_fields_are_ours() -> None:
    assert ownership.foreign([OURS, HPA]) == [("f:spec", "f:replicas")]
    shared = entry("hpa", {"f:spec": {"f:template": {"f:spec": {"f:containers": {
        'k:{"name":"web"}': {"f:image": {}}}}}}})
    assert ownership.foreign([OURS, shared]) == []


def test_without_removes_by_list_key_not_index() -> None:
    desired = {"spec": {"replicas": 3, "template": {"spec": {"containers": [
        {"name": "proxy", "image": "mine"}, {"name": "web", "image": "nginx:2"}]}}}}
    pruned = ownership.without(desired, ownership.foreign([OURS, HPA, SIDECAR]))
    assert pruned == {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:2"}]}}}}
    assert desired["spec"]["replicas"] == 3  # a copy: the input is untouched
    assert ownership.without({"data": {}}, [("f:data", "f:absent")]) == {"data": {}}


def test_our_update_entries_are_adopted_into_one_apply_entry() -> None:
    assert ownership.updated_by_us([OURS, HPA])
    status = entry("fedctl", {"f:status": {"f:replicas": {}}})
    adopted = ownership.adopted([OURS, entry("federation", {"f:data": {"f:x": {}}}, "Apply"),
                                 HPA, status], "apps/v1")
    assert "f:status" not in adopted[1]["fieldsV1"]
    assert not ownership.updated_by_us([*adopted, status])
    assert adopted[0] == HPA
    assert adopted[1]["manager"] == "federation" and adopted[1]["operation"] == "Apply"
    assert adopted[1]["fieldsV1"]["f:data"] == {"f:x": {}}
    assert "f:spec" in adopted[1]["fieldsV1"] and len(adopted) == 2
    assert not ownership.updated_by_us(adopted)


def test_other_field_types_and_bad_keys_are_ignored() -> None:
    odd = {"manager": "x", "fieldsType": "FieldsV2", "fieldsV1": {"f:spec": {}}}
    assert ownership.foreign([odd]) == []
    assert ownership.pointer(LIVE, ("f:spec", "f:template", "f:spec", "f:containers",
                                    "k:not json")) is None
    assert ownership.pointer({"l": ["a", "b"]}, ("f:l", 'v:"b"')) == "/l/1"
    assert ownership.pointer({"l": ["a", "b"]}, ("f:l", "i:0")) == "/l/0"
