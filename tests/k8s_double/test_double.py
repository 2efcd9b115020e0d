"""The API server double, exercised with the official kubernetes client (and raw HTTP where the client hides the protocol)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

from k8s_double import ApiServer, Fault
from k8s_double.patches import PatchError, json_patch, merge_patch
from k8s_double.selectors import SelectorError, parse_label_selector

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, dynamic, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": GROUP,
        "scope": "Cluster",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [{
            "name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 0},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    }},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                },
            }},
        }],
    },
}


def widget(name, size=1, labels=None, **spec):
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Widget",
            "metadata": {"name": name, "labels": labels or {}}, "spec": dict(size=size, **spec)}


@pytest.fixture
def crd(api_client):
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(CRD)
    return client.CustomObjectsApi(api_client)


def raw(api_server, method, path, body=None, content_type="application/json", token=True, **params):
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = "Bearer " + api_server.token
    data = None if body is None else json.dumps(body)
    return httpx.request(method, api_server.url + path, content=data, headers=headers, params=params, timeout=10)


def status_code(call):
    with pytest.raises(ApiException) as err:
        call()
    return err.value.status, json.loads(err.value.body) if err.value.body else {}


# -- discovery and auth -------------------------------------------------------------------


def test_discovery_answers_the_client(api_client, crd):
    assert client.VersionApi(api_client).get_code().git_version == "v1.31.0-k8s-double"
    groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    assert {"apiextensions.k8s.io", GROUP} <= groups
    core = {r.name for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert {"pods", "pods/status", "nodes", "secrets", "services", "endpoints", "namespaces", "configmaps"} <= core


def test_the_dynamic_client_finds_and_uses_a_custom_resource(api_client, crd):
    dyn = dynamic.DynamicClient(api_client)
    widgets = dyn.resources.get(api_version="%s/%s" % (GROUP, VERSION), kind="Widget")
    widgets.create(body=widget("w1", 3))
    assert widgets.get(name="w1").spec.size == 3
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    pods.create(body={"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}, namespace="default")
    assert [p.metadata.name for p in pods.get(namespace="default").items] == ["p"]


def test_a_request_without_the_token_is_unauthorized(api_server):
    assert raw(api_server, "GET", "/api/v1/pods", token=False).status_code == 401
    assert raw(api_server, "GET", "/version", token=False).status_code == 200


# -- create, get, list, selectors ----------------------------------------------------------------


def test_create_get_list_with_label_and_field_selectors(crd):
    for name, labels in (("a", {"tier": "gold", "zone": "x"}), ("b", {"tier": "silver"}), ("c", {})):
        crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget(name, labels=labels))
    got = crd.get_cluster_custom_object(GROUP, VERSION, PLURAL, "a")
    assert got["metadata"]["uid"] and got["metadata"]["generation"] == 1 and got["metadata"]["creationTimestamp"]

    def names(**kw):
        return [o["metadata"]["name"] for o in crd.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kw)["items"]]

    assert names() == ["a", "b", "c"]
    assert names(label_selector="tier=gold") == ["a"]
    assert names(label_selector="tier!=gold") == ["b", "c"]
    assert names(label_selector="tier in (gold, silver)") == ["a", "b"]
    assert names(label_selector="tier notin (gold)") == ["b", "c"]
    assert names(label_selector="tier") == ["a", "b"]
    assert names(label_selector="!tier") == ["c"]
    assert names(label_selector="tier in (gold,silver),zone=x") == ["a"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert status_code(lambda: crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a")))[0] == 409
    assert status_code(lambda: crd.get_cluster_custom_object(GROUP, VERSION, PLURAL, "zz"))[0] == 404
    assert status_code(lambda: names(label_selector="tier in (gold"))[0] == 400


def test_the_schema_is_enforced_and_unknown_fields_pruned(crd):
    code, body = status_code(lambda: crd.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Widget", "metadata": {"name": "x"}, "spec": {}}))
    assert code == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0] == {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"}
    for bad in ({"size": "big"}, {"size": -1}, {"size": 1, "color": "green"}, {"size": 1, "tags": [1]}):
        assert status_code(lambda bad=bad: crd.create_cluster_custom_object(
            GROUP, VERSION, PLURAL, {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Widget", "metadata": {"name": "x"},
                                     "spec": bad}))[0] == 422
    made = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("ok", 2, unknown="gone", extra={"any": {"thing": 1}}))
    assert "unknown" not in made["spec"] and made["spec"]["extra"] == {"any": {"thing": 1}}
    assert status_code(lambda: crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("NotDNS")))[0] == 422


def test_pods_need_an_existing_namespace_and_namespace_deletion_takes_its_objects(api_client):
    core = client.CoreV1Api(api_client)
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    assert status_code(lambda: core.create_namespaced_pod("nowhere", pod))[0] == 404
    core.create_namespace({"metadata": {"name": "team"}})
    created = core.create_namespaced_pod("team", pod)
    assert created.status.phase == "Pending"  # the API server, not the client, decides a new pod's status
    core.create_namespaced_config_map("team", {"metadata": {"name": "cm"}, "data": {"a": "b"}})
    core.create_namespaced_secret("team", {"metadata": {"name": "s"}, "data": {"k": "dg=="}})
    core.create_namespaced_service("team", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}})
    core.create_namespaced_endpoints("team", {"metadata": {"name": "svc"}, "subsets": []})
    core.create_node({"metadata": {"name": "n1", "labels": {"role": "x"}}})
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces().items] == ["p"]
    assert [n.metadata.name for n in core.list_node(label_selector="role=x").items] == ["n1"]
    core.delete_namespace("team")
    assert core.list_pod_for_all_namespaces().items == []
    assert core.list_namespaced_secret("default").items == []


# -- updates, conflicts, patches, status ------------------------------------------------------------


def test_stale_updates_and_patches_conflict(crd, api_server):
    first = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w", 1))
    second = crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", dict(first, spec={"size": 2}))
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["metadata"]["generation"] == 2
    code, body = status_code(lambda: crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", dict(first, spec={"size": 3})))
    assert (code, body["reason"]) == (409, "Conflict")
    no_rv = dict(second, metadata={"name": "w"})
    assert status_code(lambda: crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", no_rv))[0] == 422
    stale_patch = {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]}, "spec": {"size": 9}}
    assert raw(api_server, "PATCH", "/apis/example.com/v1/widgets/w", stale_patch, "application/merge-patch+json").status_code == 409
    assert raw(api_server, "PATCH", "/apis/example.com/v1/widgets/w", {"spec": {"size": 9}},
               "application/strategic-merge-patch+json").status_code == 415
    merged = raw(api_server, "PATCH", "/apis/example.com/v1/widgets/w", {"spec": {"color": "red"}}, "application/merge-patch+json")
    assert merged.json()["spec"] == {"size": 2, "color": "red"}
    ops = [{"op": "test", "path": "/spec/size", "value": 2}, {"op": "replace", "path": "/spec/size", "value": 5},
           {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    patched = raw(api_server, "PATCH", "/apis/example.com/v1/widgets/w", ops, "application/json-patch+json").json()
    assert patched["spec"]["size"] == 5 and patched["metadata"]["labels"] == {"a": "b"}
    failed = raw(api_server, "PATCH", "/apis/example.com/v1/widgets/w", [{"op": "test", "path": "/spec/size", "value": 1}],
                 "application/json-patch+json")
    assert failed.status_code == 422


def test_a_no_op_update_keeps_the_resource_version(crd):
    made = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w", 1))
    again = crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", made)
    assert again["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


def test_the_status_subresource_is_the_only_way_to_write_status(crd):
    made = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, dict(widget("w"), status={"phase": "ignored"}))
    assert "status" not in made
    changed = dict(made, status={"phase": "Ready"}, spec={"size": 99})
    with_status = crd.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, "w", changed)
    assert with_status["status"] == {"phase": "Ready"} and with_status["spec"]["size"] == 1
    main = crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", dict(with_status, status={"phase": "Lost"}))
    assert main["status"] == {"phase": "Ready"}
    stale = dict(made, status={"phase": "Old"})
    assert status_code(lambda: crd.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, "w", stale))[0] == 409


def test_core_kinds_take_strategic_merge_patches_as_merges(api_client):
    core = client.CoreV1Api(api_client)
    core.create_node({"metadata": {"name": "n1", "annotations": {"keep": "1"}}})
    core.patch_node("n1", {"metadata": {"annotations": {"new": "2"}}})
    assert core.read_node("n1").metadata.annotations == {"keep": "1", "new": "2"}
    core.patch_node("n1", {"metadata": {"annotations": {"keep": None}}})
    assert core.read_node("n1").metadata.annotations == {"new": "2"}


def test_finalizers_hold_deletion_until_they_are_removed(crd):
    made = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, dict(widget("w"), metadata={"name": "w", "finalizers": ["x/y"]}))
    deleting = crd.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "w")
    assert deleting["metadata"]["deletionTimestamp"]
    current = crd.get_cluster_custom_object(GROUP, VERSION, PLURAL, "w")
    adding = dict(current, metadata=dict(current["metadata"], finalizers=["x/y", "new/one"]))
    assert status_code(lambda: crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", adding))[0] == 422
    crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", dict(current, metadata=dict(current["metadata"], finalizers=[])))
    assert status_code(lambda: crd.get_cluster_custom_object(GROUP, VERSION, PLURAL, "w"))[0] == 404
    assert made["metadata"]["finalizers"] == ["x/y"]


def test_injected_faults_answer_with_a_status(crd, api_server):
    api_server.inject(Fault(503, method="GET", path="/widgets$", count=1, reason="ServiceUnavailable"))
    assert status_code(lambda: crd.list_cluster_custom_object(GROUP, VERSION, PLURAL))[0] == 503
    assert crd.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"] == []


# -- watch -------------------------------------------------------------------------------------------


def collect(stream, count, timeout=10):
    events, done = [], threading.Event()

    def run():
        for event in stream:
            events.append(event)
            if len(events) >= count:
                break
        done.set()

    threading.Thread(target=run, daemon=True).start()
    done.wait(timeout)
    return events


def test_watch_streams_added_modified_deleted_from_a_resource_version(crd):
    listed = crd.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    rv = listed["metadata"]["resourceVersion"]
    w = watch.Watch()
    stream = w.stream(crd.list_cluster_custom_object, GROUP, VERSION, PLURAL, resource_version=rv, timeout_seconds=5)
    made = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w", 1))
    crd.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "w", dict(made, spec={"size": 2}))
    crd.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "w")
    events = collect(stream, 3)
    w.stop()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    assert events[1]["object"]["spec"]["size"] == 2


def test_a_watch_without_resource_version_starts_with_the_current_objects(crd):
    crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("old"))
    w = watch.Watch()
    events = collect(w.stream(crd.list_cluster_custom_object, GROUP, VERSION, PLURAL, timeout_seconds=3), 1)
    w.stop()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "old")]


def test_leaving_and_entering_a_label_selector_look_like_deleted_and_added(crd, api_server):
    made = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w", labels={"team": "a"}))
    rv = made["metadata"]["resourceVersion"]
    for team in ("b", "a"):
        ops = [{"op": "replace", "path": "/metadata/labels/team", "value": team}]
        assert raw(api_server, "PATCH", "/apis/example.com/v1/widgets/w", ops, "application/json-patch+json").status_code == 200
    response = raw(api_server, "GET", "/apis/example.com/v1/widgets", watch="1", resourceVersion=rv,
                   labelSelector="team=a", timeoutSeconds="1")
    events = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]


def test_an_expired_resource_version_gets_410_gone(crd, api_server):
    made = crd.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w"))
    api_server.state.compact()
    response = raw(api_server, "GET", "/apis/example.com/v1/widgets", watch="true",
                   resourceVersion=str(int(made["metadata"]["resourceVersion"]) - 1), timeoutSeconds="1")
    (event,) = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    assert event["type"] == "ERROR"
    assert (event["object"]["kind"], event["object"]["code"], event["object"]["reason"]) == ("Status", 410, "Expired")
    with pytest.raises(ApiException) as err:
        stream = watch.Watch().stream(crd.list_cluster_custom_object, GROUP, VERSION, PLURAL, resource_version="1", timeout_seconds=1)
        for _unused in stream:
            pass
    assert err.value.status == 410


def test_bookmarks_carry_the_resource_version(crd, api_server):
    rv = crd.list_cluster_custom_object(GROUP, VERSION, PLURAL)["metadata"]["resourceVersion"]
    response = raw(api_server, "GET", "/apis/example.com/v1/widgets", watch="1", resourceVersion=rv,
                   allowWatchBookmarks="true", timeoutSeconds="1.2")
    events = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    assert events and events[-1]["type"] == "BOOKMARK"
    assert int(events[-1]["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_lists_come_in_chunks_from_one_consistent_snapshot(api_client, api_server):
    core = client.CoreV1Api(api_client)
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": "c%d" % i, "labels": {"odd": str(i % 2)}}})
    first = core.list_namespaced_config_map("default", limit=2)
    assert [c.metadata.name for c in first.items] == ["c0", "c1"]
    assert first.metadata.remaining_item_count == 3 and first.metadata._continue
    # Changes after the first chunk do not show in the next ones: they come from the first chunk's resourceVersion.
    core.delete_namespaced_config_map("c2", "default")
    core.patch_namespaced_config_map("c3", "default", {"metadata": {"labels": {"changed": "yes"}}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "c5"}})
    names, token, rvs = [], first.metadata._continue, {first.metadata.resource_version}
    while token:
        chunk = core.list_namespaced_config_map("default", limit=2, _continue=token)
        names += [c.metadata.name for c in chunk.items]
        assert all(not (c.metadata.labels or {}).get("changed") for c in chunk.items)
        token, rvs = chunk.metadata._continue, rvs | {chunk.metadata.resource_version}
    assert names == ["c2", "c3", "c4"] and len(rvs) == 1
    # With a selector: the remaining count is unknown; without a limit, a token gives all that is left.
    odd = core.list_namespaced_config_map("default", limit=1, label_selector="odd=1")
    assert [c.metadata.name for c in odd.items] == ["c1"] and odd.metadata.remaining_item_count is None
    rest = core.list_namespaced_config_map("default", label_selector="odd=1", _continue=odd.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["c3"] and not rest.metadata._continue
    # A token whose resourceVersion the server no longer keeps: 410 Expired, list again from the start.
    api_server.state.compact()
    assert status_code(lambda: core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue))[0] == 410
    assert raw(api_server, "GET", "/api/v1/namespaces/default/configmaps", limit="2", resourceVersion="1", **{"continue": token or "x"}).status_code == 400
    assert raw(api_server, "GET", "/api/v1/namespaces/default/configmaps", limit="2", **{"continue": "not-a-token"}).status_code == 400


def test_a_small_window_expires_old_positions():
    with ApiServer(window=2) as server:
        client_ = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer " + server.token})
        for i in range(5):
            client_.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "c%d" % i}})
        text = client_.get("/api/v1/configmaps", params={"watch": "1", "resourceVersion": "2", "timeoutSeconds": "1"}).text
        assert json.loads(text.splitlines()[0])["object"]["code"] == 410
        recent = client_.get("/api/v1/namespaces/default/configmaps/c4").json()["metadata"]["resourceVersion"]
        text = client_.get("/api/v1/configmaps", params={"watch": "1", "resourceVersion": str(int(recent) - 1),
                                                         "timeoutSeconds": "0.5"}).text
        assert [json.loads(line)["type"] for line in text.splitlines()] == ["ADDED"]


# -- CRD lifecycle ---------------------------------------------------------------------------------------


def test_a_crd_needs_a_valid_definition_and_its_deletion_stops_serving(api_client, api_server):
    ext = client.ApiextensionsV1Api(api_client)
    bad = json.loads(json.dumps(CRD))
    bad["metadata"]["name"] = "wrong.example.com"
    assert status_code(lambda: ext.create_custom_resource_definition(bad))[0] == 422
    made = ext.create_custom_resource_definition(CRD)
    assert {c.type: c.status for c in made.status.conditions}["Established"] == "True"
    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w"))
    ext.delete_custom_resource_definition("widgets.example.com")
    assert raw(api_server, "GET", "/apis/example.com/v1/widgets").status_code == 404


# -- without a socket ------------------------------------------------------------------------------------


def _exchange(http):
    """A client's requests that touch each part of the handler, and the answers as comparable data."""
    def answer(response):
        data = [json.loads(line) for line in response.text.splitlines()] if "watch" in str(response.url) else response.json()
        for item in data if isinstance(data, list) else [data]:  # what differs between any two servers
            for obj in (item, item.get("object") or {}):
                (obj.get("metadata") or {}).pop("uid", None)
                (obj.get("metadata") or {}).pop("creationTimestamp", None)
        return response.status_code, data

    path = "/api/v1/namespaces/default/configmaps"
    created = http.post(path, json={"metadata": {"name": "c1"}, "data": {"a": "1"}})
    first = created.json()["metadata"]["resourceVersion"]
    answers = [answer(created), answer(http.get(path + "/c1"))]
    changed = dict(created.json(), data={"a": "2"})
    answers.append(answer(http.put(path + "/c1", json=changed)))
    answers.append(answer(http.put(path + "/c1", json=changed)))  # its resourceVersion is stale now: 409
    answers.append(answer(http.get(path, params={"watch": "1", "resourceVersion": first, "timeoutSeconds": "5"})))
    answers.append(answer(http.get(path + "/c1", headers={"Authorization": "Bearer wrong"})))
    answers.append(answer(http.get("/api/v1/namespaces/default/nothings")))
    return answers


def test_without_a_socket_the_double_answers_as_over_one():
    from k8s_double import memory

    with ApiServer() as listening:
        over_tcp = _exchange(httpx.Client(base_url=listening.url, headers={"Authorization": "Bearer " + listening.token}))
    in_memory = ApiServer(listen=False)
    transport = memory.transport(in_memory)
    started = time.monotonic()
    answers = _exchange(httpx.Client(base_url=in_memory.url, transport=transport,
                                     headers={"Authorization": "Bearer " + in_memory.token}))
    assert answers == over_tcp and [status for status, _data in answers] == [201, 200, 200, 409, 200, 401, 404]
    assert [event["type"] for event in answers[4][1]] == ["MODIFIED"]
    # The watch ended once it had sent what happened, without waiting out its timeout of 5 s.
    assert time.monotonic() - started < 4
    # The kubernetes package's own client through the pool (its field selector must reach the double).
    configuration = client.Configuration(host=in_memory.url, api_key={"authorization": "Bearer " + in_memory.token})
    api = client.ApiClient(configuration)
    api.rest_client.pool_manager = memory.pool_manager(in_memory)
    listed = client.CoreV1Api(api).list_namespaced_config_map("default", field_selector="metadata.name=c1")
    assert [(c.metadata.name, c.data) for c in listed.items] == [("c1", {"a": "2"})]
    assert client.CoreV1Api(api).list_namespaced_config_map("default", field_selector="metadata.name=c2").items == []


# -- the standalone process and the pure helpers -----------------------------------------------------------


def test_the_standalone_server_writes_a_kubeconfig_that_the_client_loads(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-m", "k8s_double", "--port", "0", "--kubeconfig-out", str(kubeconfig)],
                            cwd=tests_dir, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("k8s-double listening on http://127.0.0.1:")
        configuration = client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            names = [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]
        assert "default" in names
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_patch_helpers_follow_the_rfcs():
    assert merge_patch({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}, "e": [1]}) == {"a": 1, "b": {"d": 3}, "e": [1]}
    doc = {"a": [1, 2], "b": {"c~d": 1, "e/f": 2}}
    assert json_patch(doc, [{"op": "add", "path": "/a/-", "value": 3}, {"op": "remove", "path": "/b/c~0d"},
                            {"op": "move", "from": "/b/e~1f", "path": "/g"}, {"op": "copy", "from": "/g", "path": "/h"}]) == {
        "a": [1, 2, 3], "b": {}, "g": 2, "h": 2}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "remove", "path": "/nope"}])


def test_selector_parsing_rejects_garbage():
    assert parse_label_selector("a in (x, y), b!=z")({"a": "y"})
    with pytest.raises(SelectorError):
        parse_label_selector("a in (x")
    with pytest.raises(SelectorError):
        parse_label_selector("=x")
    time.sleep(0)
