# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter from slurmrestd's answers to the exposition Prometheus reads.

slurmrestd is the boundary: its answers come from recorded data_parser v0.0.42
documents (nodes: scontrol --json of Slurm 24.11, the same schema) through
httpx's MockTransport into the collection's real client. The lab scenario
``monitoring`` scrapes the exporter against the lab's real slurmrestd.
"""

import copy
import json
import pathlib
import threading
import urllib.request

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hybridhpc_exporter import __main__ as entry
from hybridhpc_exporter import collector, model
from hybridhpc_exporter._vendor import jwt, slurmrestd

DATA = pathlib.Path(__file__).parent / "data"
NOW = 1_800_000_000
KEY = b"k" * 32


def nodes_document():
    document = json.loads((DATA / "nodes_v0.0.42.json").read_text())
    a, b, c, d, e = document["nodes"]
    b.update(state=["MIXED", "DRAIN"], reason="healthcheck: scratch: not mounted", alloc_cpus=1, cpus=4, effective_cpus=4,
             real_memory=4000, alloc_memory=1000, free_mem={"set": True, "infinite": False, "number": 2500},
             gres="gpu:a100:2(S:0)", gres_used="gpu:a100:1(IDX:0)", partitions=["p", "gpu"])
    c.update(state=["IDLE", "DRAIN"], reason="admin: disk", partitions=["p"])
    return document


def jobs_document():
    def job(job_id, state, partition, submitted):
        return {"job_id": job_id, "job_state": state, "partition": partition,
                "submit_time": {"set": True, "infinite": False, "number": submitted}}
    return {"jobs": [job(1, ["RUNNING"], "p", NOW - 50), job(2, ["PENDING"], "p", NOW - 700), job(3, ["PENDING"], "p", NOW - 30),
                     job(4, ["PENDING"], "gpu,p", NOW - 90), job(5, ["COMPLETED"], "p", NOW - 900),
                     job(6, ["RUNNING", "COMPLETING"], "gpu", NOW - 10)]}


PINGS = {"pings": [{"hostname": "ctl1", "pinged": "DOWN", "responding": False, "mode": "primary"},
                   {"hostname": "ctl2", "pinged": "UP", "responding": True, "mode": "backup"}]}


def transport(answers, seen=None):
    def handle(request):
        if seen is not None:
            seen.append((request.url.path, request.headers.get("X-SLURM-USER-TOKEN")))
        if request.headers.get("X-SLURM-USER-TOKEN") in (None, "expired"):
            return httpx.Response(401, json={"errors": [{"description": "token expired"}]})
        for suffix, answer in answers.items():
            if request.url.path.endswith("/" + suffix):
                return httpx.Response(200, json=answer) if not isinstance(answer, int) else httpx.Response(answer, json={})
        return httpx.Response(404, json={"errors": [{"description": "no such path"}]})
    return httpx.MockTransport(handle)


def scrape(answers, slurm_names=True, token="t"):
    client = slurmrestd.SlurmrestdClient(url="http://ctl1:6820", token=token, transport=transport(answers), retries=0,
                                         versions=("v0.0.42",))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector.SlurmCollector(client, slurm_names, lambda: NOW + 3600, clock=lambda: NOW))
    text = generate_latest(registry).decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, samples


ANSWERS = {"ping": PINGS, "nodes": nodes_document(), "jobs": jobs_document()}


def test_node_states_and_reasons_are_served_for_each_node():
    _text, samples = scrape(ANSWERS)
    info = {labels: value for (name, labels), value in samples.items() if name == "hybridhpc_slurm_node_state_info"}
    assert info[(("node", "cl-2"), ("reason", "healthcheck: scratch: not mounted"), ("state", "MIXED+DRAIN"))] == 1
    assert info[(("node", "cl-1"), ("reason", "hybridhpc-power: resume failed: quota exceeded"),
                 ("state", "DOWN+CLOUD+NOT_RESPONDING+POWERED_DOWN"))] == 1
    assert len(info) == 5


def test_slurm_named_counters_follow_slurms_rules():
    _text, samples = scrape(ANSWERS)
    value = lambda name, **labels: samples[(name, tuple(sorted(labels.items())))]  # noqa: E731
    assert value("slurm_nodes") == 5
    assert value("slurm_nodes_down") == 1 and value("slurm_nodes_idle") == 3 and value("slurm_nodes_mixed") == 1
    assert value("slurm_nodes_drain") == 2 and value("slurm_nodes_draining") == 1 and value("slurm_nodes_drained") == 1
    assert value("slurm_nodes_noresp") == 2 and value("slurm_nodes_powered_down") == 1 and value("slurm_nodes_cloud") == 3
    assert value("slurm_node_gpus", node="cl-2") == 2 and value("slurm_node_gpus_alloc", node="cl-2") == 1
    assert value("slurm_node_memory_bytes", node="cl-2") == 4000 * 1024 * 1024
    assert value("slurm_node_memory_free_bytes", node="cl-2") == 2500 * 1024 * 1024
    assert value("slurm_node_cpus_idle", node="cl-2") == 3
    assert value("slurm_partition_nodes", partition="gpu") == 1 and value("slurm_partition_nodes", partition="p") == 5
    assert value("slurm_partition_nodes_drain", partition="p") == 2
    assert value("slurm_jobs") == 6 and value("slurm_jobs_pending") == 3 and value("slurm_jobs_running") == 2
    assert value("slurm_jobs_completing") == 1 and value("slurm_jobs_completed") == 1
    assert value("slurm_partition_jobs_pending", partition="p") == 2  # job 4 waits in gpu, the first it names
    assert value("slurm_partition_jobs_pending", partition="gpu") == 1


def test_the_oldest_pending_job_of_each_partition():
    _text, samples = scrape(ANSWERS)
    assert samples[("hybridhpc_slurm_partition_pending_oldest_seconds", (("partition", "p"),))] == 700
    assert samples[("hybridhpc_slurm_partition_pending_oldest_seconds", (("partition", "gpu"),))] == 90


def test_controllers_in_slurm_conf_order_primary_first():
    _text, samples = scrape(ANSWERS)
    assert samples[("hybridhpc_slurm_controller_up", (("host", "ctl1"), ("index", "0")))] == 0
    assert samples[("hybridhpc_slurm_controller_up", (("host", "ctl2"), ("index", "1")))] == 1
    assert samples[("hybridhpc_slurm_up", ())] == 1


def test_without_slurm_names_only_what_slurm_does_not_serve():
    text, samples = scrape(ANSWERS, slurm_names=False)
    assert not [name for name, _labels in samples if name.startswith("slurm_")], text
    assert ("hybridhpc_slurm_up", ()) in samples


def test_slurmctld_down_is_a_sample_not_a_failed_scrape():
    down = {"pings": [{"hostname": "ctl1", "pinged": "DOWN", "responding": False}]}
    _text, samples = scrape({"ping": down, "nodes": nodes_document(), "jobs": jobs_document()})
    assert samples[("hybridhpc_slurm_up", ())] == 0
    assert not [name for name, _labels in samples if name.startswith("slurm_node")]


def test_slurmrestd_errors_and_a_rejected_token_are_up_0():
    _text, samples = scrape({"ping": PINGS, "nodes": 500, "jobs": jobs_document()})
    assert samples[("hybridhpc_slurm_up", ())] == 0
    _text, samples = scrape(ANSWERS, token="expired")
    assert samples[("hybridhpc_slurm_up", ())] == 0


def test_v0_0_45_pings_and_plain_numbers():
    pings = {"pings": [{"hostname": "ctl1", "responding": True, "primary": True, "status": "No error"}]}
    document = copy.deepcopy(nodes_document())
    for node in document["nodes"]:
        node["free_mem"] = 100
    _text, samples = scrape({"ping": pings, "nodes": document, "jobs": {"jobs": []}})
    assert samples[("hybridhpc_slurm_up", ())] == 1
    assert samples[("slurm_node_memory_free_bytes", (("node", "cl-1"),))] == 100 * 1024 * 1024


# Slurm 22.05's openapi/v0.0.38: the node state is a lower-case word plus state_flags, numbers are plain,
# free memory is free_memory, pings say ping: UP; only /slurm/v0.0.38/... is served.
NODE_0038 = {"name": "c1", "state": "mixed", "state_flags": ["DRAIN"], "reason": "healthcheck: tmp: full", "partitions": ["debug"],
             "cpus": 4, "alloc_cpus": 2, "idle_cpus": 2, "real_memory": 3000, "alloc_memory": 1000, "free_memory": 1500,
             "gres": "", "gres_used": "gpu:0"}
ANSWERS_0038 = {
    "ping": {"pings": [{"hostname": "ctl1", "ping": "UP", "status": 0, "mode": "primary"}]},
    "nodes": {"nodes": [NODE_0038, dict(NODE_0038, name="c2", state="down", state_flags=[], free_memory=-2, reason="")]},
    "jobs": {"jobs": [{"job_id": 7, "job_state": "PENDING", "partition": "debug", "submit_time": NOW - 40}]},
}


def test_v0_0_38_of_slurm_22_05_is_found_and_read():
    def handle(request):
        if "/v0.0.38/" not in request.url.path:
            return httpx.Response(404, json={"errors": [{"description": "no such path"}]})
        return httpx.Response(200, json=ANSWERS_0038[request.url.path.rsplit("/", 1)[1]])

    client = slurmrestd.SlurmrestdClient(url="http://ctl1:6820", token="t", transport=httpx.MockTransport(handle), retries=0,
                                         versions=entry.VERSIONS)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector.SlurmCollector(client, True, clock=lambda: NOW))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples}
    assert client.version == "v0.0.38"
    assert samples[("hybridhpc_slurm_up", ())] == 1
    assert samples[("hybridhpc_slurm_controller_up", (("host", "ctl1"), ("index", "0")))] == 1
    info = (("node", "c1"), ("reason", "healthcheck: tmp: full"), ("state", "MIXED+DRAIN"))
    assert samples[("hybridhpc_slurm_node_state_info", info)] == 1
    assert samples[("slurm_nodes_drain", ())] == 1 and samples[("slurm_nodes_draining", ())] == 1
    assert samples[("slurm_nodes_down", ())] == 1
    assert samples[("slurm_node_memory_free_bytes", (("node", "c1"),))] == 1500 * 1024 * 1024
    assert samples[("slurm_node_memory_free_bytes", (("node", "c2"),))] == 0
    assert samples[("slurm_node_cpus_alloc", (("node", "c1"),))] == 2
    assert samples[("hybridhpc_slurm_partition_pending_oldest_seconds", (("partition", "debug"),))] == 40
    assert samples[("slurm_jobs_pending", ())] == 1


@pytest.mark.parametrize("gres, count", [("", 0), ("gpu:2", 2), ("gpu:a100:2(S:0-1)", 2), ("gpu:a100:1(IDX:0),gpu:v100:3(IDX:1-3)", 4),
                                         ("shard:8,gpu:1", 1), ("mps:100", 0)])
def test_gpu_counts_from_gres_strings(gres, count):
    assert model.gpu_count(gres) == count


def test_served_over_http_with_the_token_file_reread_after_a_refusal(tmp_path):
    """The entry point's pieces end to end: the token file, the WSGI app, a scrape over a socket."""
    token_file = tmp_path / "token"
    token_file.write_text("expired\n")
    seen = []
    client = slurmrestd.SlurmrestdClient(url="http://ctl1:6820", token_provider=lambda: entry.read_token(str(token_file)),
                                         transport=transport(ANSWERS, seen), retries=0, versions=("v0.0.42",))
    registry = CollectorRegistry(auto_describe=False)
    good = jwt.sign_hs256_token(KEY, "slurm-exporter", 3600, now=NOW)
    registry.register(collector.SlurmCollector(client, True, lambda: entry.token_expiry(str(token_file))))
    from prometheus_client import exposition
    server = exposition.make_server("127.0.0.1", 0, exposition.make_wsgi_app(registry), exposition.ThreadingWSGIServer,
                                    handler_class=entry.QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d/metrics" % server.server_port
        first = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "hybridhpc_slurm_up 0.0" in first
        token_file.write_text(good + "\n")  # renewed by the next Ansible run
        second = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "hybridhpc_slurm_up 1.0" in second
        expiry = [s.value for f in text_string_to_metric_families(second) for s in f.samples
                  if s.name == "hybridhpc_slurm_exporter_token_expiry_timestamp_seconds"]
        assert expiry == [NOW + 3600]
    finally:
        server.shutdown()
    assert (seen[-1][1]) == good


FEDERATION = """Federation: lab
Self:       onprem:172.18.0.2:6817 ID:1 FedState:ACTIVE Features:
Sibling:    cloud:172.19.0.3:6817 ID:2 FedState:ACTIVE Features: PersistConnSend/Recv:Yes/Yes Synced:Yes
Sibling:    burst:172.20.0.3:6817 ID:3 FedState:DRAIN+REMOVE Features: PersistConnSend/Recv:No/No Synced:No
"""


def test_federation_members_from_scontrol():
    assert model.parse_federation(FEDERATION) == ("lab", [("onprem", "ACTIVE", "self"), ("cloud", "ACTIVE", "yes"), ("burst", "DRAIN", "no")])
    assert model.parse_federation("") == ("", [])
    client = slurmrestd.SlurmrestdClient(url="http://ctl1:6820", token="t", transport=transport(ANSWERS), retries=0, versions=("v0.0.42",))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector.SlurmCollector(client, False, federation=lambda: FEDERATION))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    assert samples[("hybridhpc_slurm_federation_member_active", (("federation", "lab"), ("member", "burst"), ("state", "DRAIN")))] == 0
    assert samples[("hybridhpc_slurm_federation_member_active", (("federation", "lab"), ("member", "cloud"), ("state", "ACTIVE")))] == 1
    assert samples[("hybridhpc_slurm_federation_member_connected", (("federation", "lab"), ("member", "burst")))] == 0
