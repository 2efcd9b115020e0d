"""Failures other co-schedulers met (SchedMD slurm-bridge #43, #45, #52), played against the copilot as a process.

The copilot is ``python -m hybridhpc_copilot`` between the Kubernetes API
server double and the fake slurmrestd process (copilot_process.py); each test
reads what slurmrestd served from its audit (every request, its answer and
its size), so "never" and "not again" are counted, not assumed:

* a Slurm node deleted, then slurmctld reconfigured (the node back from
  slurm.conf): nothing held is revoked, and the GenericNode says the node is
  missing while it is;
* a ``GET /jobs`` of 30 MB: read once at the start, never on a pass;
* Kubernetes Nodes (and GenericNodes) that share no Slurm node: no Slurm
  request for them, however often they change;
* a GenericNode whose alias names no Slurm node: a condition that names the
  alias, no crash, no stream of requests for it;
* a drain an admin set: never resumed, across passes, cordons and restarts;
* a placeholder job Slurm will not cancel: retried with a backoff, not on
  every pass; a submission Slurm refuses: the admission denied in Slurm's words.
"""

from __future__ import annotations

import time

from copilot_process import CopilotHarness, wait_until
from test_copilot_faults import CAPACITY, GRES_POST, NODE, SLURM_NODE, assert_converged, log_messages

from hybridhpc_copilot import names

PLACEHOLDER = {"strategy": "placeholder"}


def harness_in(workdir, **options) -> CopilotHarness:
    return CopilotHarness(workdir, nodes={SLURM_NODE: CAPACITY}, **options)


def requests_since(harness: CopilotHarness, since: float, method: str | None = None, path: str = "") -> list[dict]:
    """Slurm API requests that arrived after ``since`` (``time.time()``), of ``method`` with ``path`` in their path."""
    return [r for r in harness.slurm.audit() if r["t"] >= since and (method is None or r["method"] == method) and path in r["path"]]


def wait_quiet(harness: CopilotHarness, quiet: float = 0.6, timeout: float = 10.0) -> None:
    """Until slurmrestd served nothing but the poller's ``GET /nodes`` for ``quiet`` seconds (what was under way is done)."""
    def settled():
        recent = requests_since(harness, time.time() - quiet)
        return not [r for r in recent if not r["path"].endswith("/nodes")]

    time.sleep(quiet)
    wait_until(settled, timeout, 0.1, "slurmrestd quiet for %gs" % quiet)


def condition(harness: CopilotHarness, generic_node: str, kind: str) -> dict | None:
    conditions = (harness.kube.generic_node(generic_node).get("status") or {}).get(names.STATUS_CONDITIONS) or []
    return next((c for c in conditions if c.get("type") == kind), None)


def problems_logged(harness: CopilotHarness) -> list[dict]:
    return [e for e in harness.copilot.logs() if e.get("level") in ("error", "critical") or e.get("msg") == "first sync incomplete: retrying"]


def annotate(harness: CopilotHarness, kind_path: str, name: str, beat: int) -> None:
    """A write that changes nothing the copilot reads (a heartbeat-like annotation): an event all the same."""
    harness.kube.request("PATCH", "%s/%s" % (kind_path, name), {"metadata": {"annotations": {"example.com/beat": str(beat)}}},
                         "application/merge-patch+json")


GENERICNODES = "/apis/kai.alibabacloud.com/v1alpha1/genericnodes"


# -- a: a Slurm node deleted, then slurmctld reconfigured ------------------------------------------


def test_a_slurm_node_deleted_and_reconfigured_back_keeps_every_admission_and_shows_it_missing_meanwhile(tmp_path):
    with harness_in(tmp_path) as harness:
        harness.share(NODE, SLURM_NODE, pods=("p1", "p2"))
        harness.copilot.start()
        harness.kube.add_admission(NODE, "a1", "p1", cpu="2", memory="2Gi")
        harness.kube.wait_for_admission(NODE, "a1", names.GRANTED)
        # a2 is reserved, its GRES write held at slurmrestd, when the node vanishes from Slurm.
        harness.slurm.hold("POST", GRES_POST, phase="before")
        harness.kube.add_admission(NODE, "a2", "p2", cpu="1", memory="1Gi")
        harness.slurm.wait_held()
        harness.slurm.delete_node(SLURM_NODE)
        harness.slurm.release(apply=False)  # dropped: the client's retry finds no such node
        missing = wait_until(lambda: (c := condition(harness, NODE, names.CONDITION_SLURM_NODE_MISSING)) and c["status"] == "True" and c,
                             10, 0.05, "the SlurmNodeMissing condition")
        assert SLURM_NODE in missing["message"] and missing["reason"] == "NotInSlurm", missing
        deadline = time.monotonic() + 2  # passes go on (Slurm is polled every 0.2 s): nothing is revoked
        while time.monotonic() < deadline:
            ledger = harness.kube.ledger(NODE)
            assert {uid: e["state"] for uid, e in ledger.items()} == {"a1": names.GRANTED, "a2": names.RESERVED}, ledger
            obj = harness.kube.generic_node(NODE)
            assert names.FINALIZER in obj["metadata"].get("finalizers", []), obj["metadata"]
            assert sorted(a["uid"] for a in obj["spec"]["admissions"]) == ["a1", "a2"]
            time.sleep(0.1)
        for pod in ("p1", "p2"):
            harness.kube.request("GET", "/api/v1/namespaces/default/pods/%s" % pod)  # no pod was deleted
        # scontrol reconfigure: the node is back from slurm.conf with its configured counts; the copilot lowers them again.
        harness.slurm.reconfigure()
        harness.kube.wait_for_admission(NODE, "a2", names.GRANTED)
        wait_until(lambda: condition(harness, NODE, names.CONDITION_SLURM_NODE_MISSING)["status"] == "False", 10, 0.05, "the condition cleared")
        assert_converged(harness, {"a1": ("2", "2Gi"), "a2": ("1", "1Gi")})
        assert problems_logged(harness) == []


# -- b: a 30 MB job listing ---------------------------------------------------------------------------


def test_a_30_mb_job_listing_is_read_once_at_the_start_and_never_on_a_pass(tmp_path):
    pods = ["p%d" % i for i in range(1, 5)]
    with harness_in(tmp_path, foreign_jobs=30_000, copilot_settings=PLACEHOLDER) as harness:
        harness.share(NODE, SLURM_NODE, pods=pods)
        started = time.time()
        harness.copilot.start(timeout=60)
        listings = requests_since(harness, started, "GET", "/jobs")
        assert len(listings) == 1 and listings[0]["bytes"] > 30_000_000, [(r["path"], r["bytes"]) for r in listings]
        since = time.time()
        for number, pod in enumerate(pods, 1):
            harness.kube.add_admission(NODE, "a%d" % number, pod, cpu="1", memory="1Gi")
            harness.kube.wait_for_admission(NODE, "a%d" % number, names.GRANTED, timeout=15)
        harness.kube.delete_pod("p1")  # released: its job is cancelled
        wait_until(lambda: harness.kube.ledger(NODE)["a1"]["state"] == names.RELEASED, 10, what="a1 released")
        wait_until(lambda: not [j for j in harness.slurm.state()["jobs"].values() if j["name"].endswith("/a1") and j["state"] != "CANCELLED"],
                   10, what="a1's placeholder job cancelled")
        time.sleep(1)  # polls and passes go on
        served = requests_since(harness, since)
        assert [r for r in served if r["path"].split("?")[0].endswith("/jobs")] == []
        assert requests_since(harness, since, "GET", "/job/"), "the placeholder jobs were not read by id"
        assert sum(r["bytes"] for r in served) < 1_000_000, sum(r["bytes"] for r in served)
        assert problems_logged(harness) == []


# -- c: Kubernetes nodes that are not Slurm nodes ------------------------------------------------------------


def test_kubernetes_nodes_that_share_no_slurm_node_are_ignored_however_often_they_change(tmp_path):
    workers = ["worker-%d" % i for i in range(10)]
    with harness_in(tmp_path, copilot_settings=PLACEHOLDER) as harness:
        harness.share(NODE, SLURM_NODE, pods=("p1", "p2"))
        for worker in workers:
            harness.kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": worker}, "spec": {}})
        harness.kube.create({"apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "GenericNode",
                             "metadata": {"name": "worker-0", "labels": {names.LABEL_CLUSTER_NAME: harness.cluster}},
                             "spec": {"type": "Other", "alias": SLURM_NODE}})
        harness.copilot.start()
        harness.kube.add_admission(NODE, "a1", "p1", cpu="1", memory="1Gi")
        harness.kube.wait_for_admission(NODE, "a1", names.GRANTED)  # a placeholder job runs: a pass could read it
        wait_quiet(harness)  # the passes the grant itself set off (its job started: the node changed) are over
        since, beats = time.time(), 0
        while time.time() < since + 2:
            for worker in workers:  # node heartbeats: each an event the copilot sees
                beats += 1
                annotate(harness, "/api/v1/nodes", worker, beats)
            annotate(harness, GENERICNODES, "worker-0", beats)
        served = requests_since(harness, since)
        assert beats >= 50, beats
        assert [r for r in served if any(w in r["path"] for w in workers)] == []
        assert [(r["method"], r["path"]) for r in served if not r["path"].endswith("/nodes")] == [], "Slurm read for non-Slurm nodes"
        harness.kube.add_admission(NODE, "a2", "p2", cpu="1", memory="1Gi")  # and the copilot still does its work
        harness.kube.wait_for_admission(NODE, "a2", names.GRANTED)
        assert problems_logged(harness) == []


# -- d: an alias that names no Slurm node ----------------------------------------------------------------------


def test_a_generic_node_whose_alias_names_no_slurm_node_gets_a_condition_naming_it_and_no_stream_of_requests(tmp_path):
    with harness_in(tmp_path) as harness:
        harness.share(NODE, SLURM_NODE, pods=("p1", "p2"))
        harness.share("k8s-ghost", "ghost")
        started = time.time()
        harness.copilot.start()
        harness.kube.add_admission("k8s-ghost", "g1", "p1", cpu="1", memory="1Gi")
        denied = harness.kube.wait_for_admission("k8s-ghost", "g1", names.DENIED)
        assert "ghost" in denied["reason"], denied
        missing = condition(harness, "k8s-ghost", names.CONDITION_SLURM_NODE_MISSING)
        assert missing is not None and missing["status"] == "True" and missing["reason"] == "NotInSlurm", missing
        assert "ghost" in missing["message"] and "spec.alias" in missing["message"], missing
        assert condition(harness, NODE, names.CONDITION_SLURM_NODE_MISSING) is None  # a node Slurm has never gets it
        wait_quiet(harness)
        quiet = time.time()
        time.sleep(2)  # ten polls of Slurm: none may ask for the ghost again
        assert requests_since(harness, quiet, path="ghost") == []
        assert len(requests_since(harness, started, path="ghost")) <= 4, requests_since(harness, started, path="ghost")
        harness.kube.add_admission(NODE, "a1", "p2", cpu="1", memory="1Gi")  # the other node is served as ever
        harness.kube.wait_for_admission(NODE, "a1", names.GRANTED)
        assert harness.copilot.running and problems_logged(harness) == []


# -- e: an admin's drain ---------------------------------------------------------------------------------------


def drain_of(harness: CopilotHarness) -> tuple[bool, str]:
    node = harness.slurm.node(SLURM_NODE)
    return "DRAIN" in node["states"], node["reason"]


def test_a_drain_set_by_an_admin_is_never_cleared_across_cordons_passes_and_restarts(tmp_path):
    admin_reason = "disk errors on /scratch, ticket 4711"
    with harness_in(tmp_path) as harness:
        harness.share(NODE, SLURM_NODE)
        harness.copilot.start()
        # The copilot's own drain comes and goes with the cordon: it does resume what it set.
        harness.kube.set_unschedulable(NODE, True)
        wait_until(lambda: drain_of(harness)[0] and drain_of(harness)[1].startswith(names.DRAIN_REASON_PREFIX), 10, 0.05, "the copilot's drain")
        harness.kube.set_unschedulable(NODE, False)
        wait_until(lambda: not drain_of(harness)[0], 10, 0.05, "the copilot's drain resumed")
        harness.slurm.drain(SLURM_NODE, admin_reason)
        for restart in (False, True):
            if restart:
                harness.copilot.kill()
                harness.copilot.start()
            for cordoned in (True, False, True, False):
                harness.kube.set_unschedulable(NODE, cordoned)
                time.sleep(0.5)  # passes on the change, and polls after it
                assert drain_of(harness) == (True, admin_reason), (restart, cordoned)
            annotations = harness.kube.request("GET", "/api/v1/nodes/%s" % NODE)["metadata"].get("annotations") or {}
            assert annotations.get(names.ANNOTATION_SLURM_DRAIN_REASON) == admin_reason, annotations
        assert harness.slurm.state()["violations"] == []
        assert problems_logged(harness) == []


# -- the placeholder strategy's Slurm refusals ---------------------------------------------------------------


def placeholder_job_of(harness: CopilotHarness, uid: str) -> tuple[int, str] | None:
    for job_id, job in harness.slurm.state()["jobs"].items():
        if job["name"].endswith("/" + uid):
            return int(job_id), job["state"]
    return None


def test_a_placeholder_job_slurm_will_not_cancel_is_retried_with_a_backoff_not_on_every_pass(tmp_path):
    with harness_in(tmp_path, copilot_settings=PLACEHOLDER) as harness:
        harness.share(NODE, SLURM_NODE, pods=("p1",))
        harness.copilot.start()
        harness.kube.add_admission(NODE, "a1", "p1", cpu="1", memory="1Gi")
        harness.kube.wait_for_admission(NODE, "a1", names.GRANTED)
        job_id, _state = placeholder_job_of(harness, "a1")
        harness.slurm.fail("DELETE", r"/job/%d$" % job_id, "Access/permission denied", number=2002, count=1000)
        since, beats = time.time(), 0
        harness.kube.delete_pod("p1")
        while time.time() < since + 3:  # the scheduler's writes wake a pass every 50 ms
            beats += 1
            annotate(harness, GENERICNODES, NODE, beats)
            time.sleep(0.05)
        cancels = requests_since(harness, since, "DELETE", "/job/%d" % job_id)
        assert 1 <= len(cancels) <= 5, "%d cancels in 3 s" % len(cancels)
        assert all(r["status"] == 500 for r in cancels)
        harness.slurm.release()  # Slurm takes the cancel now: it goes through at the next try
        deadline = time.monotonic() + 20
        while placeholder_job_of(harness, "a1")[1] != "CANCELLED":
            assert time.monotonic() < deadline, "the placeholder job was never cancelled"
            beats += 1
            annotate(harness, GENERICNODES, NODE, beats)
            time.sleep(0.1)
        assert log_messages(harness, "action failed", action="CancelPlaceholder")


def test_a_placeholder_job_slurm_refuses_denies_the_admission_with_slurms_words(tmp_path):
    refusal = "Invalid account or account/partition combination specified"
    with harness_in(tmp_path, copilot_settings=PLACEHOLDER) as harness:
        harness.share(NODE, SLURM_NODE, pods=("p1", "p2"))
        harness.copilot.start()
        harness.slurm.fail("POST", r"/job/submit$", refusal, number=2045)
        harness.kube.add_admission(NODE, "a1", "p1", cpu="1", memory="1Gi")
        denied = harness.kube.wait_for_admission(NODE, "a1", names.DENIED, timeout=10)  # the reservation timeout is 60 s
        assert "Slurm refused the placeholder job" in denied["reason"] and refusal in denied["reason"], denied
        assert placeholder_job_of(harness, "a1") is None
        harness.kube.add_admission(NODE, "a2", "p2", cpu="1", memory="1Gi")  # the next one goes through
        harness.kube.wait_for_admission(NODE, "a2", names.GRANTED)
