"""Units, config, tokens, the slurmrestd adapter, metrics, sd_notify and the working loop's pieces."""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import pathlib
import pkgutil
import socket
import threading

import httpx
import pytest
from copilot_builders import CLUSTER, NOW, admission, entry, generic_node, node_object, parse_exposition, pod_object, rest_slurm, rest_slurm_of
from copilot_process import KubeDouble
from fakes.slurm_state import GRES_CPU, GRES_MEMORY, REGISTRATION_REASON, RESUMABLE_DRAINS, FakeNode, FakeSlurm, SlurmctldDown, SlurmctldRefused
from fakes.slurmrestd import FakeSlurmrestd
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hybridhpc_copilot import config, core, names, placeholder, tokens, units
from hybridhpc_copilot._vendor import jwt
from hybridhpc_copilot.backoff import Backoff
from hybridhpc_copilot.compaction import compact
from hybridhpc_copilot.executor import Executor, Outcome, _retry_key
from hybridhpc_copilot.informers import Informer, keep_generic_node
from hybridhpc_copilot.kube import GENERICNODES, NODES, finalizer_body, ledger_body
from hybridhpc_copilot.metrics import LedgerCollector, Metrics, exposition_chunks
from hybridhpc_copilot.passes import Copilot, _decided
from hybridhpc_copilot.poller import SlurmPoller, changed_nodes
from hybridhpc_copilot.slurm import RestSlurm, SlurmRefused, SlurmUnavailable, node_from_rest
from hybridhpc_copilot.systemd import Notifier

# -- units ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "millis"), [("2", 2000), ("2735m", 2735), ("0.5", 500), ("1.0001", 1001), ("1e3", 10**6),
                                              (3, 3000), ("100u", 1), ("0", 0)])
def test_cpu_quantities_round_up_to_millicores(text, millis):
    assert units.cpu_millis(text) == millis


@pytest.mark.parametrize(("text", "nbytes"), [("2Gi", 2 * 2**30), ("3417Mi", 3417 * 2**20), ("1k", 1000), ("1.5Ki", 1536),
                                              ("100", 100), ("0.5", 1), ("1M", 10**6)])
def test_memory_quantities_round_up_to_bytes(text, nbytes):
    assert units.memory_bytes(text) == nbytes


@pytest.mark.parametrize("bad", ["", "2x", "-1", "Gi", True, None, float("inf")])
def test_bad_quantities_are_refused(bad):
    with pytest.raises(units.QuantityError):
        units.cpu_millis(bad)


def test_formats_and_gres_strings():
    assert [units.format_memory(n) for n in (0, 4000 * units.MIB, 4 * 2**30, 3072, 1536)] == ["0", "4000Mi", "4Gi", "3Ki", "1536"]
    assert units.split_gres("gpu:tesla:2(S:0-1),k8scpu:4,k8smemory:1G,shard") == (
        ("gpu", "tesla", 2), ("k8scpu", None, 4), ("k8smemory", None, 2**30), ("shard", None, 1))
    assert units.parse_gres("(null)") == {} and units.parse_gres("gpu:a:1(IDX:0,1),gpu:b:2") == {"gpu": 3}
    assert units.replace_gres("gpu:2,k8scpu:4,k8smemory:10", {"k8scpu": 1, "k8smemory": 2}) == "gpu:2,k8scpu:1,k8smemory:2"
    assert units.replace_gres("", {"k8smemory": 2, "k8scpu": 1}) == "k8scpu:1,k8smemory:2"


# -- config -------------------------------------------------------------------------------------------


def test_a_full_config_file_loads(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "cluster_name: onprem\ncluster_namespace: slurm\nslurmrestd: {url: 'http://ctl:6820', user: admin}\n"
        "token: {source: secret}\nnodes: {c1: {k8scpu: 4, k8smemory: 8000}}\nusage_source: gres\nmetrics: {port: 0}\ndebounce: 0.05\n")
    cfg = config.load(["--config", str(path), "--dry-run", "--log-level", "debug"])
    assert (cfg.cluster_name, cfg.slurmrestd.url, cfg.slurmrestd.user, cfg.token.source) == ("onprem", "http://ctl:6820", "admin", "secret")
    assert cfg.dry_run and not cfg.once and cfg.log_level == "debug" and cfg.metrics.port == 0
    assert cfg.settings().configured == {"c1": core.Capacity(4, 8000)} and cfg.settings().usage_source == "gres"
    assert cfg.debounce == 0.05 and config.from_dict({"cluster_name": "x"}).debounce == 0


@pytest.mark.parametrize(("data", "message"), [
    ({}, "cluster_name is required"),
    ({"cluster_name": "x", "colour": 1}, "unknown key colour in the config file"),
    ({"cluster_name": "x", "slurmrestd": {"urll": "x"}}, "unknown key slurmrestd.urll in slurmrestd"),
    ({"cluster_name": "x", "resync_interval": "often"}, "resync_interval must be a number"),
    ({"cluster_name": "x", "debounce": -0.1}, "debounce must not be negative"),
    ({"cluster_name": "x", "debounce": 30}, "debounce must be at most 5 seconds"),
    ({"cluster_name": "x", "drain_sync": "yes"}, "drain_sync must be true or false"),
    ({"cluster_name": "x", "usage_source": "guess"}, "usage_source must be one of max, gres"),
    ({"cluster_name": "x", "nodes": {"c1": {"k8scpu": 4}}}, "nodes.c1 must be {k8scpu: N, k8smemory: MB}"),
    ({"cluster_name": "x", "token": {"source": "file"}}, "token.file is required"),
    ({"cluster_name": "x", "token": {"lifespan": 5}}, "token.lifespan must be at least 30"),
])
def test_config_errors_name_the_key_and_the_fix(data, message):
    with pytest.raises(config.ConfigError) as err:
        config.from_dict(data)
    assert message in str(err.value)


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"cluster_name": "a", "slurmrestd": {"url": "http://x"}}))
    cfg = config.load(["--config", str(path), "--cluster-name", "b", "--slurmrestd-url", "http://y", "--metrics-port", "9", "--once"])
    assert (cfg.cluster_name, cfg.slurmrestd.url, cfg.metrics.port, cfg.once) == ("b", "http://y", 9, True)


# -- tokens --------------------------------------------------------------------------------------------


def test_key_file_tokens_are_short_lived_and_renewed(tmp_path):
    key = tmp_path / "jwt.key"
    key.write_bytes(b"secret\n")
    now = [1000.0]
    source = tokens.KeyFileTokens(str(key), "slurm", lifespan=300, clock=lambda: now[0])
    first = source.current()
    claims = jwt.decode_hs256_token(first, b"secret\n", now=1000)
    assert claims == {"exp": 1300, "iat": 1000, "sun": "slurm"}
    now[0] = 1150
    assert source.current() == first
    now[0] = 1250  # under a third of the life left
    assert source.current() != first
    with pytest.raises(tokens.TokenError):
        tokens.KeyFileTokens(str(tmp_path / "missing"), "slurm").current()


def test_secret_tokens_are_read_again_before_expiry():
    def token(exp):
        return jwt.sign_hs256_token(b"k", "slurm", 100, now=exp - 100)

    secrets = [token(1100), token(2000)]
    reads = []

    def read_secret(namespace, name):
        reads.append((namespace, name))
        value = base64.b64encode(base64.b64encode(secrets[len(reads) - 1].encode())).decode()  # ACK's value is base64 too
        return {"data": {CLUSTER: value}}

    now = [1000.0]
    source = tokens.SecretTokens(read_secret, CLUSTER, clock=lambda: now[0], min_left=60)
    assert source.current() == secrets[0] and source.current() == secrets[0]
    now[0] = 1050
    assert source.current() == secrets[1]
    assert reads == [(names.JWT_SECRET_NAMESPACE, names.JWT_SECRET_NAME)] * 2
    with pytest.raises(tokens.TokenError):
        tokens.SecretTokens(lambda ns, n: None, CLUSTER).current()


def test_a_token_file_is_read_each_time(tmp_path):
    path = tmp_path / "token"
    path.write_text("a.b.c\n")
    assert tokens.FileTokens(str(path)).current() == "a.b.c"


# -- the slurmrestd adapter ----------------------------------------------------------------------------


def test_rest_slurm_reads_and_changes_nodes_through_slurmrestd(tmp_path):
    key = tmp_path / "jwt.key"
    key.write_bytes(b"k" * 32)
    fake = FakeSlurm([FakeNode("c1", 4, 8000, other_gres="gpu:1")])
    with FakeSlurmrestd(fake, jwt_key=key.read_bytes()) as server:
        slurm = RestSlurm(server.url, tokens.KeyFileTokens(str(key), "slurm"))
        node = slurm.node_states()["c1"]
        assert (node.gres, node.counts, node.states) == ("gpu:1,k8scpu:4,k8smemory:8000", (4, 8000), ("IDLE",))
        slurm.set_node_gres("c1", "gpu:1,k8scpu:3,k8smemory:100")
        slurm.drain_node("c1", "copilot: cordoned")
        assert slurm.node_states(["c1", "nope"])["c1"].drained
        slurm.resume_node("c1")
        assert fake.nodes["c1"].gres == "gpu:1,k8scpu:3,k8smemory:100" and not fake.nodes["c1"].reason
        with pytest.raises(SlurmRefused):
            slurm.set_node_gres("nope", "k8scpu:1,k8smemory:1")
        bad = RestSlurm(server.url, tokens.FileTokens(str(tmp_path / "t")))
        (tmp_path / "t").write_text(jwt.sign_hs256_token(b"wrong", "slurm", 60))
        with pytest.raises(SlurmRefused):
            bad.node_states()
        slurm.close()


def test_rest_slurm_maps_unavailability(tmp_path):
    def controller_down(_operation, _node):
        raise SlurmctldDown("connect failure")

    slurm = rest_slurm_of(FakeSlurm([FakeNode("c1", 4, 8000)], fault=controller_down))  # slurmrestd answers 500, error 1001
    with pytest.raises(SlurmUnavailable):
        slurm.node_states()
    rest = FakeSlurmrestd(FakeSlurm([FakeNode("c1", 4, 8000)]), listen=False)
    down = rest_slurm(rest)
    down.client._sleep = lambda s: None
    rest.fail("GET", "/nodes$", "Service Unavailable", status=503, count=10)
    with pytest.raises(SlurmUnavailable):
        down.node_states()
    assert len([r for r in rest.requests if r.path.endswith("/nodes")]) == 3  # two retries, then unavailable


def test_node_json_of_every_data_parser_version():
    node = node_from_rest({"name": "c1", "gres": "k8scpu:2", "alloc_cpus": 1, "alloc_memory": {"set": True, "number": 10},
                           "state": "IDLE+DRAIN", "reason": "x"})
    assert (node.alloc_memory_mb, node.states) == (10, ("IDLE+DRAIN",))
    assert node_from_rest({"name": "c1", "state": ["idle", "drain"]}).drained


def test_the_executor_falls_back_when_slurm_refuses_a_count_under_its_usage():
    class Refusing(FakeSlurm):
        def set_node_gres(self, name, gres):
            if "k8scpu:2" in gres:
                raise SlurmctldRefused(2072, "Invalid generic resource (gres) specification", "count under the allocation")
            super().set_node_gres(name, gres)

    slurm = Refusing([FakeNode("c1", 4, 8000)])
    kube = kube_client()
    executor = Executor(kube, rest_slurm_of(slurm), Informer(kube, GENERICNODES))
    outcome = executor.run([core.SetGres(None, "c1", "k8scpu:2,k8smemory:8000", (2, 8000), "r", "k8scpu:3,k8smemory:8000")])
    assert not outcome.errors and slurm.nodes["c1"].gres == "k8scpu:3,k8smemory:8000"


# -- loop pieces ----------------------------------------------------------------------------------------


def kube_client(double=None):
    """The copilot's Kubernetes client, to the API server double in memory (a new one unless given)."""
    return (double or KubeDouble(listen=False).start()).client()


def test_the_informer_ignores_older_events_and_relists_after_gone():
    double = KubeDouble(window=2, listen=False).start()
    double.add_in_process(node_object("n"))
    kube = kube_client(double)
    informer = Informer(kube, NODES)
    informer.relist()
    listed_at = informer.resource_version
    newer = kube.annotate_node("n", "a", "1")
    informer.put(newer)
    informer.apply("MODIFIED", dict(newer, metadata=dict(newer["metadata"], resourceVersion=listed_at, annotations={})))
    assert informer.get("n").annotations == {"a": "1"}
    for i in range(3):
        kube.annotate_node("n", "b", str(i))
    informer.resource_version = listed_at  # four writes ago: out of the double's window of two
    copilot = Copilot(kube, rest_slurm_of(FakeSlurm()), core.Settings(), CLUSTER)
    copilot.nodes = informer
    copilot.informers = (informer,)
    copilot.pump()  # 410 Gone: listed again
    assert [query.get("watch") for _method, _path, query in double.server.requests[-2:]] == ["true", None]
    assert informer.get("n").annotations["b"] == "2"


def test_a_watch_on_an_informer_never_listed_lists_first_and_a_lost_event_loses_no_object():
    """Found by the property test: a restarted copilot whose first watch (from "0") lost the ADDED event
    of one GenericNode took the cache as synced without it, saw its Slurm node as unshared and gave
    Slurm the whole GRES back while pods held part of it."""
    double = KubeDouble(listen=False).start()
    for name in ("k8s-c1", "k8s-c2"):
        double.add_in_process(generic_node(name, name[4:]))
    informer = Informer(kube_client(double), GENERICNODES)
    informer.watch(0, drop=lambda _event, obj: obj["metadata"]["name"] == "k8s-c2")
    assert informer.synced and sorted(informer.snapshot()) == ["k8s-c1", "k8s-c2"]
    assert [query.get("watch") for _method, _path, query in double.server.requests[-2:]] == [None, "true"]


def test_a_relist_keeps_the_cached_objects_the_list_shows_unchanged():
    kept = []
    double = KubeDouble(listen=False).start()
    for name in ("k8s-c1", "k8s-c2"):
        double.add_in_process(generic_node(name, name[4:], status={}))
    informer = Informer(kube_client(double), GENERICNODES, keep=lambda obj, cached: kept.append(obj) or keep_generic_node(obj, cached))
    informer.relist()
    first = informer.snapshot()
    double.update_in_process("k8s-c2", lambda obj: obj.update(status={"admissions": {}}), subresource="status")
    del kept[:]
    informer.relist()
    # The unchanged one is the very object cached (not compacted again); the changed one is the list's.
    assert informer.get("k8s-c1") is first["k8s-c1"]
    assert [o["metadata"]["name"] for o in kept] == ["k8s-c2"] and informer.get("k8s-c2").status == {"admissions": {}}


def test_decisions_are_logged_only_once_the_ledger_took_them():
    double = KubeDouble(listen=False).start()
    double.add_in_process(generic_node(status={}))
    double.intercept("PUT", "/status$", lambda _method, _path: 409, count=None)  # someone else writes each ledger first
    kube = kube_client(double)
    informer = Informer(kube, GENERICNODES)
    informer.relist()
    executor = Executor(kube, rest_slurm_of(FakeSlurm([FakeNode("c1", 4, 8000)])), informer)
    obj = informer.get("k8s-c1")
    outcome = executor.run([core.GrantAdmission("k8s-c1", "a1", "r"),
                            core.WriteStatus("k8s-c1", obj.resource_version, {"admissions": {}}),
                            core.SetGres("k8s-c1", "c1", "k8scpu:1,k8smemory:1", (1, 1), "r")])
    assert outcome.conflicts == 1 and outcome.applied == []  # the node's SetGres waits for the next round


def _gres_round(versions=("v0.0.40", "v0.0.41", "v0.0.42"), slurm=None, conflict=None):
    """GenericNodes k8s-c1..c4 cached, and an executor to a fake slurmrestd of ``versions``; ``conflict``: a GenericNode
    whose ledger write someone else's write beats (409). Returns the double, the fake, the executor, and a round's
    actions: each node's ledger write, then its GRES (the same Gres string on c1-c3, another on c4)."""
    double = KubeDouble(listen=False).start()
    for i in range(1, 5):
        double.add_in_process(generic_node("k8s-c%d" % i, "c%d" % i, status={}))
    if conflict is not None:
        double.intercept("PUT", "/%s/status$" % conflict, lambda _method, _path: 409, count=None)
    kube = kube_client(double)
    informer = Informer(kube, GENERICNODES)
    informer.relist()
    slurm = slurm or FakeSlurm([FakeNode("c%d" % i, 4, 8000) for i in range(1, 5)])
    rest = FakeSlurmrestd(slurm, listen=False, versions=versions)
    executor = Executor(kube, rest_slurm(rest), informer, backoff=Backoff(clock=lambda: 0.0))
    actions = []
    for i in range(1, 5):
        name, cpus = "k8s-c%d" % i, 3 if i < 4 else 2
        actions.append(core.WriteStatus(name, informer.get(name).resource_version, {"admissions": {}}))
        actions.append(core.SetGres(name, "c%d" % i, "k8scpu:%d,k8smemory:8000" % cpus, (cpus, 8000), "ledger wants",
                                    "k8scpu:4,k8smemory:8000"))
    return double, rest, executor, actions


def _gres_posts(rest):
    return [(call.path.rsplit("/", 2)[-1] if call.path.endswith("/nodes") else call.path.rsplit("/", 1)[-1],
             call.body.get("name"), call.body["gres"]) for call in rest.calls("POST")]


def test_a_round_sets_one_gres_string_on_many_nodes_in_one_request_each_after_its_ledger_write():
    ledger_first = []

    def fault(operation, node):
        if operation == "set_node_gres":  # slurmctld applies the update: the node's ledger must be written by now
            ledger_first.append(("PUT", "/apis/kai.alibabacloud.com/v1alpha1/genericnodes/k8s-%s/status" % node)
                                in double.requests_seen())

    slurm = FakeSlurm([FakeNode("c%d" % i, 4, 8000) for i in range(1, 5)], fault=fault)
    double, rest, executor, actions = _gres_round(slurm=slurm, conflict="k8s-c2")
    outcome = executor.run(actions)
    # c2's ledger write lost to someone else's: its GRES waits for the next round, and the others' do not wait for it.
    assert outcome.conflicts == 1 and outcome.errors == []
    assert _gres_posts(rest) == [("nodes", ["c1", "c3"], "k8scpu:3,k8smemory:8000"), ("c4", None, "k8scpu:2,k8smemory:8000")]
    assert ledger_first == [True, True, True]
    assert [slurm.nodes["c%d" % i].count_cpu for i in range(1, 5)] == [3, 4, 3, 2]
    assert outcome.applied == [a for a in actions if a.node != "k8s-c2"] and outcome.wrote == 6


def test_a_gres_update_of_several_nodes_that_slurm_refuses_goes_node_by_node_with_its_fallback():
    class Refusing(FakeSlurm):
        def set_node_gres(self, name, gres):
            if name == "c2" and gres.startswith("k8scpu:3"):
                raise SlurmctldRefused(2072, "Invalid generic resource (gres) specification", "count under the allocation")
            super().set_node_gres(name, gres)

    slurm = Refusing([FakeNode("c%d" % i, 4, 8000) for i in range(1, 5)])
    _double, rest, executor, actions = _gres_round(slurm=slurm)
    outcome = executor.run(actions)
    assert outcome.errors == [] and outcome.wrote == 8
    posts = _gres_posts(rest)
    # First the batch; after its refusal each node alone, c2's fallback after its refused update. Lanes and
    # fallbacks run side by side, so only those orders are fixed.
    assert posts[0] == ("nodes", ["c1", "c2", "c3"], "k8scpu:3,k8smemory:8000")
    assert sorted(posts[1:]) == [("c1", None, "k8scpu:3,k8smemory:8000"), ("c2", None, "k8scpu:3,k8smemory:8000"),
                                 ("c2", None, "k8scpu:4,k8smemory:8000"), ("c3", None, "k8scpu:3,k8smemory:8000"),
                                 ("c4", None, "k8scpu:2,k8smemory:8000")]
    assert posts.index(("c2", None, "k8scpu:3,k8smemory:8000")) < posts.index(("c2", None, "k8scpu:4,k8smemory:8000"))
    assert [slurm.nodes["c%d" % i].count_cpu for i in range(1, 5)] == [3, 4, 3, 2]


def test_a_gres_update_of_several_nodes_slurm_did_not_answer_fails_for_each_and_waits_its_backoff():
    def fault(operation, _node):
        if operation == "set_node_gres":
            raise SlurmctldDown()

    slurm = FakeSlurm([FakeNode("c%d" % i, 4, 8000) for i in range(1, 5)], fault=fault)
    _double, rest, executor, actions = _gres_round(slurm=slurm)
    outcome = executor.run(actions)
    assert [kind for kind, _message, temporary in outcome.errors if temporary] == ["SetGres"] * 4
    assert [post[0] for post in _gres_posts(rest)] == ["nodes", "c4"]  # not again one by one: Slurm is away
    assert not any(executor.backoff.ready(_retry_key(a)) for a in actions if isinstance(a, core.SetGres))


def test_a_slurmrestd_without_post_nodes_gets_each_gres_update_alone():
    _double, rest, executor, actions = _gres_round(versions=("v0.0.40", "v0.0.41"))
    outcome = executor.run(actions)
    assert outcome.errors == [] and outcome.wrote == 8
    assert sorted(_gres_posts(rest)) == [("c%d" % i, None, "k8scpu:%d,k8smemory:8000" % (3 if i < 4 else 2)) for i in range(1, 5)]


def test_pod_cache_misses_are_confirmed_with_a_get():
    double = KubeDouble(listen=False).start()
    double.add_in_process(generic_node(admissions=[admission("a1")], status={"admissions": {}}))
    double.add_in_process(pod_object("p1"))
    copilot = Copilot(kube_client(double), rest_slurm_of(FakeSlurm([FakeNode("c1", 4, 8000)])), core.Settings(), CLUSTER)
    copilot.generic_nodes.relist()
    copilot.nodes.relist()
    copilot.pods.resource_version = str(double.server.state.rv)  # "synced", but it never saw p1
    observed = copilot.observe({})
    assert ("default", "p1") in observed.pods and ("GET", "/api/v1/namespaces/default/pods/p1") in double.requests_seen()


def test_the_ledger_gauges_are_read_from_the_cache_at_each_scrape():
    double = KubeDouble(listen=False).start()
    status = {"admissions": {"a1": entry(names.GRANTED), "a2": entry(names.RESERVED, pod="p2")},
              "allocatedResources": [{"type": "Kubernetes", "allocated": {"cpu": "1500m", "memory": "1Gi"}}],
              "conditions": [{"type": names.CONDITION_OVERCOMMITTED, "status": "True"}]}
    double.add_in_process(generic_node(status=status))
    double.add_in_process(generic_node("k8s-c2", "c2", status={}, finalizers=()))
    double.add_in_process(generic_node("k8s-x", "x", node_type="Other", status=status))
    metrics = Metrics()
    copilot = Copilot(kube_client(double), rest_slurm_of(FakeSlurm()), core.Settings(), CLUSTER, metrics=metrics)
    copilot.relist()
    samples = parse_exposition(metrics.exposition().decode())
    assert samples[("hybridhpc_copilot_ledger_allocated", (("node", "k8s-c1"), ("resource", "cpu"), ("type", "Kubernetes")))] == 1.5
    assert samples[("hybridhpc_copilot_ledger_allocated", (("node", "k8s-c1"), ("resource", "memory"), ("type", "Kubernetes")))] == 2**30
    assert [samples[("hybridhpc_copilot_admissions", (("node", "k8s-c1"), ("state", state)))] for state in names.ADMISSION_STATES] == [1, 1, 0, 0]
    assert samples[("hybridhpc_copilot_overcommitted", (("node", "k8s-c1"),))] == 1.0
    assert samples[("hybridhpc_copilot_overcommitted", (("node", "k8s-c2"),))] == 0.0
    assert not any(("node", "k8s-x") in labels for _name, labels in samples)  # not a Slurm node: not the copilot's
    # No pass runs: what the watch brings is on the next scrape, and a node gone from the cache is gone from it.
    double.update_in_process("k8s-c1", lambda obj: obj.update(status={"admissions": {"a1": entry(names.RELEASED)}}),
                             subresource="status")
    double.delete_in_process("k8s-c2")
    copilot.pump()
    text = metrics.exposition().decode()
    samples = parse_exposition(text)
    assert [samples[("hybridhpc_copilot_admissions", (("node", "k8s-c1"), ("state", state)))] for state in names.ADMISSION_STATES] == [0, 0, 0, 1]
    assert samples[("hybridhpc_copilot_overcommitted", (("node", "k8s-c1"),))] == 0.0
    assert ("hybridhpc_copilot_ledger_allocated", (("node", "k8s-c1"), ("resource", "cpu"), ("type", "Kubernetes"))) not in samples
    assert 'node="k8s-c2"' not in text


def test_compacted_objects_are_equal_share_their_small_parts_and_leave_the_original_alone():
    def parsed():  # as each parse makes them: equal, and nothing shared
        return json.loads(json.dumps(generic_node(status={
            "allocatedResources": [{"type": "Slurm", "allocated": {"cpu": "0", "memory": "0"}}],
            "flags": [True, 1, 1.0, None, "1"], "admissions": {}})))

    first, second = parsed(), parsed()
    before = json.dumps(first)
    a, b = compact(first), compact(second)
    assert a == first == b and json.dumps(first) == before  # the same JSON, the input untouched
    assert [type(v) for v in a["status"]["flags"]] == [bool, int, float, type(None), str]  # true is not 1, 1 not 1.0
    assert a["metadata"]["labels"] is b["metadata"]["labels"] and a["status"]["allocatedResources"] is b["status"]["allocatedResources"]
    assert a["metadata"] is not b["metadata"]  # it holds the object's own resourceVersion: not shared
    assert a["kind"] is b["kind"] and a["metadata"]["resourceVersion"] is first["metadata"]["resourceVersion"]  # not interned
    assert compact(a) is a  # already compact: kept as it is
    status = {"admissions": {}, "slurm": {"node": "c1"}}
    assert compact({"status": status})["status"] is compact(status)


def test_a_new_version_compacted_like_the_cached_one_reuses_its_unchanged_parts_and_only_those():
    def parsed(**status):
        return json.loads(json.dumps(generic_node(status={
            "allocatedResources": [{"type": "Slurm", "allocated": {"cpu": "0", "memory": "0"}}],
            "slurm": {"node": "c1", "cpus": 4, "flags": [True, 1]}, **status})))

    cached = compact(parsed(admissions={}))
    new = parsed(admissions={"default/p1": {"state": "Reserved"}})
    new["metadata"]["resourceVersion"] = "11"
    kept = compact(new, cached)
    assert kept == new and kept["metadata"]["resourceVersion"] == "11" and kept["status"]["admissions"] == {"default/p1": {"state": "Reserved"}}
    assert kept["spec"] is cached["spec"] and kept["status"]["slurm"] is cached["status"]["slurm"]  # unchanged: the cached part
    assert kept["metadata"]["labels"] is cached["metadata"]["labels"]
    assert compact(json.loads(json.dumps(cached)), cached) is cached  # nothing changed: the cached object itself
    # Equal to Python is not equal as JSON: true is not 1, 1 is not 1.0; such a part is the new one.
    retyped = json.loads(json.dumps(cached))
    retyped["status"]["slurm"]["flags"] = [1, 1]
    retyped["status"]["slurm"]["cpus"] = 4.0
    kept = compact(retyped, cached)
    assert kept["status"]["slurm"] is not cached["status"]["slurm"]
    assert [type(v) for v in kept["status"]["slurm"]["flags"]] == [int, int] and type(kept["status"]["slurm"]["cpus"]) is float
    assert kept["spec"] is cached["spec"]


def test_the_poller_remembers_fingerprints_not_snapshots():
    slurm = FakeSlurm([FakeNode("c1", 4, 8000), FakeNode("c2", 4, 8000)])
    poller = SlurmPoller(rest_slurm_of(slurm))
    fresh = poller.poll()
    assert poller.nodes == {name: hash(node) for name, node in fresh.items()}
    slurm.nodes["c2"].count_cpu = 3
    c2 = poller.poll_nodes(["c2"])["c2"]
    assert c2.counts == (3, 8000) and poller.nodes["c2"] == hash(c2)
    seen = []
    poller.on_change = seen.append
    poller.poll()
    assert seen == []  # poll_nodes noted c2's change already
    del slurm.nodes["c2"]
    assert poller.poll_nodes(["c2"]) == {} and set(poller.nodes) == {"c1"}  # gone from Slurm: gone from the snapshot
    poller.poll()
    assert seen == []


def test_a_failing_api_server_makes_the_pass_report_not_crash():
    double = KubeDouble(listen=False).start()
    double.intercept(None, "", lambda _method, _path: 503, count=None)
    result = Copilot(kube_client(double), rest_slurm_of(FakeSlurm()), core.Settings(), CLUSTER).sync(full=True)
    assert not result.ok and result.errors[0][0] == "kubernetes"


def test_poller_reports_changes_and_forgets_on_errors():
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)])
    seen = []
    poller = SlurmPoller(rest_slurm_of(slurm), on_change=seen.append)
    poller.poll()
    poller.poll()
    slurm.nodes["c1"].count_cpu = 3
    poller.poll()
    assert seen == [{"c1"}, {"c1"}]
    assert changed_nodes({"a": 1}, {"b": 1}) == {"a", "b"}
    slurm.fault = lambda op, node: (_ for _ in ()).throw(SlurmctldDown("down"))
    with pytest.raises(SlurmUnavailable):
        poller.poll()
    assert poller.nodes is None


def test_ledger_and_finalizer_bodies_hold_to_the_version_read_and_leave_the_cached_object_alone():
    cached = {"metadata": {"name": "k8s-c1", "resourceVersion": "7", "finalizers": ["other/one", names.FINALIZER]},
              "spec": {"alias": "c1"}, "status": {"admissions": {}}}
    before = json.dumps(cached, sort_keys=True)
    ledger = ledger_body(cached, {"admissions": {"a1": {}}}, "5")
    assert (ledger["status"], ledger["metadata"]["resourceVersion"]) == ({"admissions": {"a1": {}}}, "5")
    assert (ledger["apiVersion"], ledger["kind"]) == (names.API_VERSION, names.KIND)
    removed = finalizer_body(cached, False)
    assert removed["metadata"] == {"name": "k8s-c1", "resourceVersion": "7", "finalizers": ["other/one"]}
    assert "status" not in removed  # a PUT of the object must not look like a status write
    added = finalizer_body(removed, True)
    assert added["metadata"]["finalizers"] == ["other/one", names.FINALIZER]
    assert json.dumps(cached, sort_keys=True) == before


def test_nothing_fake_is_in_the_installed_package():
    package = pathlib.Path(core.__file__).parent
    modules = [importlib.import_module("hybridhpc_copilot." + info.name) for info in pkgutil.iter_modules([str(package)])]
    assert {m.__name__.rsplit(".", 1)[1] for m in modules} >= {"core", "kube", "slurm", "informers", "executor", "passes", "runner"}
    fakes = [(m.__name__, name) for m in modules for name in vars(m) if name.startswith("Fake")]
    assert not fakes, "the role installs every module of the package: fakes belong in tests/"


# -- metrics and systemd ----------------------------------------------------------------------------------


# Every family /metrics shows and its labels (the README's table; dashboards and alerts read them).
FAMILIES = {
    "hybridhpc_copilot_reconciles": ("counter", {"mode"}),
    "hybridhpc_copilot_errors": ("counter", {"kind"}),
    "hybridhpc_copilot_actions": ("counter", {"action"}),
    "hybridhpc_copilot_conflicts": ("counter", set()),
    "hybridhpc_copilot_reconcile_duration_seconds": ("histogram", set()),
    "hybridhpc_copilot_ledger_allocated": ("gauge", {"node", "type", "resource"}),
    "hybridhpc_copilot_admissions": ("gauge", {"node", "state"}),
    "hybridhpc_copilot_overcommitted": ("gauge", {"node"}),
    "hybridhpc_copilot_ready": ("gauge", set()),
    "hybridhpc_copilot_last_success_timestamp_seconds": ("gauge", set()),
}


def test_metrics_keep_their_names_and_labels():
    metrics = Metrics()
    metrics.actions.labels("SetGres").inc()
    metrics.conflicts.inc()
    metrics.reconciles.labels("full").inc()
    metrics.errors.labels("Conflict").inc()
    metrics.latency.observe(0.02)
    rows = [("k8s-c1", {("Kubernetes", "cpu"): 2.735, ("Slurm", "memory"): 4000 * units.MIB}, {"Granted": 1}, True)]
    metrics.ledger.source = lambda: rows  # read at each scrape
    samples = parse_exposition(metrics.exposition().decode())
    assert samples[("hybridhpc_copilot_reconciles_total", (("mode", "full"),))] == 1.0
    assert samples[("hybridhpc_copilot_errors_total", (("kind", "Conflict"),))] == 1.0
    assert samples[("hybridhpc_copilot_ledger_allocated", (("node", "k8s-c1"), ("resource", "cpu"), ("type", "Kubernetes")))] == 2.735
    assert samples[("hybridhpc_copilot_ledger_allocated", (("node", "k8s-c1"), ("resource", "memory"), ("type", "Slurm")))] == 4000 * 2**20
    assert samples[("hybridhpc_copilot_admissions", (("node", "k8s-c1"), ("state", "Granted")))] == 1.0
    assert samples[("hybridhpc_copilot_overcommitted", (("node", "k8s-c1"),))] == 1.0
    assert samples[("hybridhpc_copilot_reconcile_duration_seconds_bucket", (("le", "0.025"),))] == 1.0
    assert samples[("hybridhpc_copilot_reconcile_duration_seconds_count", ())] == 1.0
    assert samples[("hybridhpc_copilot_admissions", (("node", "k8s-c1"), ("state", "Reserved")))] == 0.0
    # Prometheus' own reading of the text: each family once, with its type and labels.
    families = [f for f in text_string_to_metric_families(metrics.exposition().decode()) if not f.name.endswith("_created")]
    assert sorted(f.name for f in families) == sorted(FAMILIES)
    for family in families:
        kind, labels = FAMILIES[family.name]
        assert family.type == kind and {k for s in family.samples for k in s.labels} - {"le"} == labels, family.name
    rows[:] = [("k8s-c2", {}, {}, False)]  # k8s-c1 left the cache
    text = metrics.exposition().decode()
    assert 'node="k8s-c1"' not in text
    assert parse_exposition(text)[("hybridhpc_copilot_overcommitted", (("node", "k8s-c2"),))] == 0.0


def test_metrics_are_served_one_family_at_a_time_and_a_failing_source_answers_500():
    metrics = Metrics()
    metrics.ledger.source = lambda: [("k8s-c%05d" % i, {("Slurm", "cpu"): i}, {"Granted": 1}, False) for i in range(3000)]
    server = metrics.serve("127.0.0.1", 0)
    try:
        url = "http://127.0.0.1:%d/metrics" % server.server_address[1]
        answer = httpx.get(url)
        assert answer.status_code == 200 and answer.text.encode() == metrics.exposition()
        samples = parse_exposition(answer.text)
        assert len([k for k in samples if k[0] == "hybridhpc_copilot_admissions"]) == 3000 * len(names.ADMISSION_STATES)
        assert samples[("hybridhpc_copilot_ledger_allocated", (("node", "k8s-c02999"), ("resource", "cpu"), ("type", "Slurm")))] == 2999
        assert answer.text.count("# TYPE hybridhpc_copilot_ledger_allocated gauge") == 1  # one group per family
        metrics.ledger.source = lambda: (_ for _ in ()).throw(RuntimeError("cache gone"))
        assert httpx.get(url).status_code == 500
    finally:
        metrics.close()


def test_the_ledger_collector_reads_the_cache_at_each_scrape_and_holds_no_child_per_node():
    reads = []

    def source():
        reads.append(1)
        return [("k8s-c%d" % i, {("Slurm", "cpu"): i}, {"Granted": 1}, False) for i in range(50)]

    CollectorRegistry(auto_describe=True).register(LedgerCollector(source))  # registering reads nothing
    assert reads == []
    metrics = Metrics()
    metrics.ledger.source = source
    metrics.exposition()
    metrics.exposition()
    assert len(reads) == 2 * 3  # each of the three families reads the rows as it is written
    # What stays between scrapes: the collector and its source, nothing per node.
    assert vars(metrics.ledger) == {"source": source}


def test_the_per_node_families_are_written_in_pieces_that_add_up_to_prometheus_clients_exposition():
    metrics = Metrics()
    metrics.reconciles.labels("full").inc()
    metrics.ledger.source = lambda: [("k8s-c%02d" % i, {("Slurm", "cpu"): i}, {"Granted": 1}, i % 2 == 0) for i in range(25)]
    pieces = list(exposition_chunks(metrics.registry, batch=10))
    assert b"".join(pieces) == generate_latest(metrics.registry)  # the same text as written whole
    ledger = [p for p in pieces if b"node=" in p]
    assert max(p.count(b"node=") for p in ledger) == 10 and sum(p.count(b"node=") for p in ledger) == 25 * (1 + 4 + 1)


def test_sd_notify_is_a_no_op_outside_systemd_and_speaks_to_abstract_sockets():
    assert not Notifier({}).ready()
    name = "hybridhpc-copilot-test-%d" % id(object())
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    try:
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "10000000"})
        assert notifier.watchdog_seconds == 10 and notifier.ready("ok") and notifier.stopping()
        assert sock.recv(100) == b"READY=1\nSTATUS=ok" and sock.recv(100) == b"STOPPING=1"
    finally:
        sock.close()
    assert Notifier({"WATCHDOG_USEC": "5", "WATCHDOG_PID": "1"}).watchdog_seconds is None


def test_entries_are_counted_by_what_they_hold():
    ledger = {"a": entry(names.GRANTED, cpu="1500m", memory="1Mi"), "b": entry(names.RESERVED, cpu="1", memory="1"),
              "c": entry(names.DENIED, cpu="9"), "d": {"state": names.GRANTED, "request": {"cpu": "junk"}}}
    assert core.holdings(ledger) == (2500, units.MIB + 1)
    assert core.wanted_counts(core.Capacity(4, 10), ledger) == (1, 8)


def test_the_fake_refuses_a_registration_like_slurmctld():
    # The fake's names are slurm.conf's and slurmctld's; the copilot's names.py must say the same.
    assert (GRES_CPU, GRES_MEMORY, REGISTRATION_REASON) == (names.GRES_CPU, names.GRES_MEMORY, names.REGISTRATION_REASON)
    assert RESUMABLE_DRAINS.search(names.DRAIN_REASON_PREFIX + " cordoned") and not RESUMABLE_DRAINS.search("admin: bad DIMM")
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)])
    copilot = rest_slurm_of(slurm)  # what the copilot reads and does, through its own client
    slurm.set_node_gres("c1", "k8scpu:3,k8smemory:7488")
    assert slurm.register("c1")  # no job holds the GRES: the new counts are recorded
    job = slurm.start_job("c1", 3, 1000)
    slurm.set_node_gres("c1", "k8scpu:4,k8smemory:8000")
    assert not slurm.register("c1")
    view = copilot.node_states()["c1"]
    assert view.invalid_registration and view.drained
    assert view.registration_refused == ("k8scpu", 3)
    with pytest.raises(SlurmRefused):
        copilot.resume_node("c1")
    slurm.end_job("c1", job)
    assert slurm.register("c1") and not copilot.node_states()["c1"].invalid_registration
    slurm.start_job("c1", 1, 10)  # drained: does not start
    copilot.resume_node("c1")  # the drain the refusal set may be resumed; RESUME registers again
    assert not slurm.violations and not copilot.node_states()["c1"].drained
    job = slurm.start_job("c1", 1, 10)
    slurm.set_node_gres("c1", "k8scpu:2,k8smemory:8000")
    slurm.admin_drain("c1", "copilot: cordoned")
    copilot.resume_node("c1")  # a RESUME with a changed count under a job is refused like a restart
    assert copilot.node_states()["c1"].invalid_registration


# -- retrying failed Slurm actions --------------------------------------------------------------


def test_a_failed_action_waits_twice_as_long_after_each_failure_up_to_the_limit_and_a_success_forgets_it():
    now = [0.0]
    backoff = Backoff(first=0.5, limit=4.0, clock=lambda: now[0])
    assert backoff.ready("cancel 7")
    assert [backoff.failed("cancel 7") for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert not backoff.ready("cancel 7") and backoff.ready("cancel 8")
    now[0] = 3.9
    assert not backoff.ready("cancel 7")
    now[0] = 4.0
    assert backoff.ready("cancel 7")
    backoff.succeeded("cancel 7")
    assert backoff.failed("cancel 7") == 0.5


def test_the_executor_holds_back_a_slurm_action_that_failed_and_sends_a_changed_one_at_once():
    calls = []

    def fault(operation, node):
        calls.append(operation)
        if operation == "cancel_job":
            raise SlurmctldRefused(2002, "Access/permission denied")

    now = [0.0]
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)], fault=fault)
    job = slurm.submit_job("copilot-placeholder/k8s-c1/a1", "c1", 1, 1024)
    executor = Executor(kube_client(), rest_slurm_of(slurm), None, backoff=Backoff(clock=lambda: now[0]))
    cancel = placeholder.CancelPlaceholder("k8s-c1", job, "copilot-placeholder/k8s-c1/a1", "no held admission needs it")
    del calls[:]
    assert executor.run([cancel]).errors[0][0] == "CancelPlaceholder" and calls == ["cancel_job"]
    again = executor.run([dataclasses.replace(cancel, reason="another pass")])  # the reason is no part of the action
    assert again.errors == [("CancelPlaceholder", "waiting to retry after Slurm failed it", True)] and calls == ["cancel_job"]
    gres = core.SetGres("k8s-c1", "c1", "k8scpu:3,k8smemory:7000", (3, 7000), "ledger wants")
    assert executor.run([gres]).wrote == 1 and calls == ["cancel_job", "set_node_gres"]
    now[0] = 0.5
    executor.run([cancel])
    assert calls == ["cancel_job", "set_node_gres", "cancel_job"]


def test_the_executor_keeps_slurms_refusal_of_a_placeholder_job_until_a_denial_carries_it():
    def fault(operation, _node):
        if operation == "submit_job":
            raise SlurmctldRefused(2045, "Invalid account or account/partition combination specified")

    executor = Executor(kube_client(), rest_slurm_of(FakeSlurm([FakeNode("c1", 4, 8000)], fault=fault)), None)
    name = placeholder.job_name("k8s-c1", "a1")
    executor.run([placeholder.SubmitPlaceholder("k8s-c1", "c1", name, 1, 1024, "hold")])
    assert list(executor.refusals) == [name] and "Invalid account or account/partition combination specified" in executor.refusals[name]
    executor._record(core.DenyAdmission("k8s-c1", "a1", "Slurm refused the placeholder job: ..."), Outcome())
    assert executor.refusals == {}


def test_the_backoff_forgets_actions_nobody_sent_again_for_a_while():
    now = [0.0]
    backoff = Backoff(first=0.5, limit=4.0, clock=lambda: now[0])
    backoff.failed("gres 3")
    backoff.failed("gres 3")
    now[0] = 10.0  # decided differently since: "gres 3" never went again
    backoff.failed("gres 2")
    assert backoff.failed("gres 3") == 0.5


class _MeetingSlurm:
    """Slurm's side of the executor for the lanes test: each GenericNode's first GRES update waits until the other's arrives."""

    def __init__(self, parties: int):
        self.meeting = threading.Barrier(parties, timeout=10)
        self.updates: list[tuple[str, str]] = []
        self.met: set[str] = set()

    def set_node_gres(self, slurm_node: str, gres: str) -> None:
        if slurm_node not in self.met:
            self.met.add(slurm_node)
            self.meeting.wait()  # one lane at a time never gets past this: the barrier breaks after 10 s
        self.updates.append((slurm_node, gres))


def test_the_executor_carries_out_different_generic_nodes_at_once_and_each_ones_actions_in_order():
    slurm = _MeetingSlurm(parties=2)
    actions = [
        core.SetGres("k8s-c1", "c1", "k8scpu:3", (3, 0), "ledger wants"),
        core.SetGres("k8s-c1", "c1", "k8scpu:2", (2, 0), "ledger wants"),
        core.SetGres("k8s-c2", "c2", "k8scpu:1", (1, 0), "ledger wants"),
    ]
    outcome = Executor(None, slurm, None, lanes=2).run(actions)
    assert outcome.errors == [] and outcome.wrote == 3
    assert [u for u in slurm.updates if u[0] == "c1"] == [("c1", "k8scpu:3"), ("c1", "k8scpu:2")]
    # what was applied comes back in the actions' order, whichever lane finished first
    assert outcome.applied == actions


class _DrainingSlurm:
    """Slurm's side of the executor for the streaming test: notes each drain."""

    def __init__(self):
        self.drained = threading.Event()

    def drain_node(self, slurm_node: str, reason: str) -> None:
        self.drained.set()


def test_a_generic_nodes_actions_go_while_the_next_is_decided():
    slurm = _DrainingSlurm()

    def groups():
        yield [core.DrainNode("k8s-c1", "c1", "cordoned")]
        # the next GenericNode is decided only now: the first one's drain must not wait for it
        assert slurm.drained.wait(10), "the first GenericNode's actions waited for the next decision"
        yield [core.DrainNode("k8s-c2", "c2", "cordoned")]
        yield []  # nothing tied to no GenericNode

    for lanes in (1, 4):
        slurm.drained.clear()
        outcome = Executor(None, slurm, None, lanes=lanes).run_groups(groups())
        assert outcome.errors == [] and [a.node for a in outcome.applied] == ["k8s-c1", "k8s-c2"]


def test_a_decided_generic_node_leaves_the_observed_snapshot():
    nodes = [generic_node("k8s-c%d" % i, "c%d" % i, status={}) for i in (1, 2)]
    observed = core.Observed({g["metadata"]["name"]: keep_generic_node(g) for g in nodes}, {}, {}, {}, NOW, core.Settings())
    decided = _decided(observed)
    next(decided)
    assert list(observed.generic_nodes) == ["k8s-c2"]  # k8s-c1's old version is no longer held for the round
    list(decided)
    assert observed.generic_nodes == {}


class _MeetingClient:
    """slurmrestd's client for the parallel reads test: the first two node reads wait for each other."""

    def __init__(self):
        self.meeting = threading.Barrier(2, timeout=10)
        self.token = None

    def node(self, name: str) -> dict:
        if name in ("c1", "c2"):
            self.meeting.wait()  # one read at a time never gets past this: the barrier breaks after 10 s
        return {"name": name, "gres": "k8scpu:1", "state": ["IDLE"], "cpus": 4, "real_memory": 8000}


def test_a_pass_reads_several_slurm_nodes_at_once():
    slurm = RestSlurm(client=_MeetingClient())
    assert sorted(slurm.node_states(["c1", "c2", "c3"])) == ["c1", "c2", "c3"]
