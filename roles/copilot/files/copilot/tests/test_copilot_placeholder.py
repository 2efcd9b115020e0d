"""The placeholder strategy, rule by rule (core.reconcile with strategy: placeholder), and its Slurm calls."""

from __future__ import annotations

import dataclasses

from copilot_builders import NOW, admission, entry, generic_node, observed, of, pod, rest_slurm, rest_slurm_of, slurm_node, status_of
from fakes.slurm_state import FakeNode, FakeSlurm
from fakes.slurmrestd import FakeSlurmrestd

from hybridhpc_copilot import names
from hybridhpc_copilot.core import DenyAdmission, GrantAdmission, ReleaseAdmission, ReserveAdmission, WriteStatus, reconcile
from hybridhpc_copilot.job_table import PlaceholderJobTable
from hybridhpc_copilot.placeholder import CancelPlaceholder, PlaceholderJob, SubmitPlaceholder, job_name, parse_job_name

GRANTED, RESERVED, DENIED, RELEASED = names.GRANTED, names.RESERVED, names.DENIED, names.RELEASED


def stock_node(alloc_cpus=0, alloc_mem=0, states=("IDLE",), reason=""):
    """A node without the k8s GRES: 4 CPUs, 8000 MB."""
    return dataclasses.replace(
        slurm_node(states=states, reason=reason, alloc_cpus=alloc_cpus, alloc_mem=alloc_mem), gres="", gres_used="", cpus=4, memory_mb=8000
    )


def job(uid, state="RUNNING", job_id=7, cpus=1, memory_mb=1024, node="k8s-c1"):
    return PlaceholderJob(job_id, job_name(node, uid), state, "c1", cpus, memory_mb)


def run(gn, jobs=(), node=None, pods=None, refusals=None, **kwargs):
    pods = [pod()] if pods is None else list(pods)
    seen = observed([gn], pods, [node or stock_node()], configured={}, strategy="placeholder", **kwargs)
    return reconcile(dataclasses.replace(seen, slurm_jobs=None if jobs is None else tuple(jobs), refusals=refusals or {}))


def test_job_names_carry_the_generic_node_and_the_admission():
    assert job_name("k8s-c1", "a/1") == "copilot-placeholder/k8s-c1/a/1"
    assert parse_job_name("copilot-placeholder/k8s-c1/a/1") == ("k8s-c1", "a/1")
    assert parse_job_name("someone-else/k8s-c1/a1") is None and parse_job_name("copilot-placeholder/x") is None


def test_a_fitting_admission_is_reserved_first_and_then_a_job_of_its_whole_size_submitted():
    actions = run(generic_node(admissions=[admission("a1", cpu="2735m", memory="3417Mi")]))
    kinds = [a.kind for a in actions]
    assert kinds.index("WriteStatus") < kinds.index("SubmitPlaceholder")
    assert of(actions, ReserveAdmission)[0].uid == "a1"
    (submit,) = of(actions, SubmitPlaceholder)
    assert (submit.slurm_node, submit.job_name, submit.cpus, submit.memory_mb) == ("c1", "copilot-placeholder/k8s-c1/a1", 3, 3417)
    assert status_of(actions)[names.STATUS_ADMISSIONS]["a1"]["state"] == RESERVED


def test_granted_once_the_job_runs_and_the_ledger_shows_slurm_without_it():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    actions = run(gn, [job("a1")], node=stock_node(alloc_cpus=4, alloc_mem=2024))  # 3 CPUs Slurm's own + 1 placeholder
    assert of(actions, GrantAdmission)[0].reason == "placeholder job 7 runs on c1"
    status = status_of(actions)
    assert status[names.STATUS_SLURM] == {"node": "c1", "strategy": "placeholder", "placeholderJobs": [7]}
    assert status[names.STATUS_ALLOCATED] == [
        {"allocated": {"cpu": "3", "memory": "1000Mi"}, "type": "Slurm"},
        {"allocated": {"cpu": "1", "memory": "1Gi"}, "type": "Kubernetes"},
    ]
    assert not of(actions, SubmitPlaceholder) and not of(actions, CancelPlaceholder)


def test_a_pending_job_waits_then_the_reservation_is_denied_and_the_job_cancelled():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    assert not [a for a in run(gn, [job("a1", "PENDING")]) if not isinstance(a, WriteStatus)]
    late = run(gn, [job("a1", "PENDING")], now=NOW + 120)
    assert "placeholder job within 60s" in of(late, DenyAdmission)[0].reason
    assert of(late, CancelPlaceholder)[0].job_id == 7


def test_when_slurm_took_the_room_first_the_newest_reservations_are_denied():
    gn = generic_node(
        admissions=[admission("a1", cpu="2"), admission("a2", pod="p2", cpu="2")],
        status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED, cpu="2"), "a2": entry(RESERVED, pod="p2", cpu="2", uid="pod-uid-p2")}},
    )
    jobs = [job("a1", "PENDING", 7, 2), job("a2", "PENDING", 8, 2)]
    actions = run(gn, jobs, node=stock_node(alloc_cpus=2, alloc_mem=100), pods=[pod(), pod("p2")])
    assert [d.uid for d in of(actions, DenyAdmission)] == ["a2"]
    assert [c.job_id for c in of(actions, CancelPlaceholder)] == [8]


def test_a_job_that_ended_before_it_ran_denies_the_reservation():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    actions = run(gn, [job("a1", "CANCELLED")])
    assert of(actions, DenyAdmission)[0].reason == "placeholder job 7 ended CANCELLED before it ran"
    assert not of(actions, SubmitPlaceholder)


def test_a_restarted_copilot_finds_the_job_it_submitted_and_submits_no_second_one():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    assert not of(run(gn, [job("a1", "PENDING")]), SubmitPlaceholder)


def test_a_released_admission_cancels_its_job():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    actions = run(gn, [job("a1")], pods=[])
    assert of(actions, ReleaseAdmission)[0].reason == "pod deleted"
    kinds = [a.kind for a in actions]
    assert kinds.index("WriteStatus") < kinds.index("CancelPlaceholder")


def test_a_granted_admission_whose_job_ended_gets_a_new_one_and_shows_overcommitted():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    actions = run(gn, [job("a1", "TIMEOUT")])
    assert of(actions, SubmitPlaceholder)[0].job_name == "copilot-placeholder/k8s-c1/a1"
    condition = status_of(actions)[names.STATUS_CONDITIONS][0]
    assert (condition["status"], condition["reason"]) == ("True", "SlurmUsedKubernetesShare")
    assert "a1" in condition["message"]


def test_jobs_nothing_holds_are_cancelled_also_for_generic_nodes_that_are_gone():
    gn = generic_node(status={names.STATUS_ADMISSIONS: {}})
    actions = run(gn, [job("stray", job_id=9), job("x", job_id=10, node="k8s-gone"), job("y", "COMPLETED", 11)])
    assert sorted(c.job_id for c in of(actions, CancelPlaceholder)) == [9, 10]


def test_a_drained_node_takes_no_new_admission():
    gn = generic_node(admissions=[admission("a1")])
    actions = run(gn, node=stock_node(states=("IDLE", "DRAIN"), reason="bad DIMM"))
    assert "is drained (bad DIMM)" in of(actions, DenyAdmission)[0].reason
    assert not of(actions, SubmitPlaceholder)


def test_nothing_is_decided_while_the_jobs_cannot_be_listed():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    actions = run(gn, node=stock_node())
    assert of(actions, SubmitPlaceholder)  # jobs listed: the reservation lacks its job
    unknown = run(gn, None)
    assert not [a for a in unknown if not isinstance(a, WriteStatus)]


def test_the_fake_schedules_placeholder_jobs_against_cpus_and_memory():
    slurm = FakeSlurm([FakeNode("c1", 4, 8000, gres_shared=False)])
    assert slurm.start_job("c1", 3, 1000) is not None
    first = slurm.submit_job(job_name("k8s-c1", "a1"), "c1", 1, 512)
    second = slurm.submit_job(job_name("k8s-c1", "a2"), "c1", 1, 512)
    states = {j.job_id: j.state for j in slurm.list_jobs()}
    assert states == {first: "RUNNING", second: "PENDING"}
    assert slurm.start_job("c1", 1, 10) is None
    view = rest_slurm_of(slurm).node_states()["c1"]  # as the copilot reads it
    assert (view.alloc_cpus, view.cpus, view.counts) == (4, 4, (None, None))
    slurm.cancel_job(first)
    assert {j.job_id: j.state for j in slurm.list_jobs()} == {first: "CANCELLED", second: "RUNNING"}


def test_rest_slurm_lists_submits_and_cancels_placeholder_jobs():
    model = FakeSlurm([FakeNode("c1", 4, 8000, gres_shared=False)])
    first = model.submit_job("copilot-placeholder/k8s-c1/a1", "c1", 2, 3417)
    rest = FakeSlurmrestd(model, listen=False, foreign_jobs=2)  # and two other users' jobs
    slurm = rest_slurm(rest, placeholder_job={"partition": "plain", "time_limit": 1440})
    assert slurm.placeholder_jobs() == [PlaceholderJob(first, "copilot-placeholder/k8s-c1/a1", "RUNNING", "c1", 2, 3417, "None")]
    second = slurm.submit_placeholder("copilot-placeholder/k8s-c1/a2", "c1", 3, 3417)
    assert model.jobs[second].name == "copilot-placeholder/k8s-c1/a2"
    submitted = rest.requests[-1].body
    assert submitted["script"].startswith("#!/bin/sh") and "sleep infinity" in submitted["script"]
    job = submitted["job"]
    assert (job["name"], job["partition"], job["required_nodes"], job["cpus_per_task"], job["tasks"]) == (
        "copilot-placeholder/k8s-c1/a2",
        "plain",
        ["c1"],
        3,
        1,
    )
    assert job["memory_per_node"]["number"] == 3417 and job["time_limit"]["number"] == 1440
    slurm.cancel_job(second)
    assert rest.requests[-1][:2] == ("DELETE", "/slurm/v0.0.42/job/%d" % second) and model.jobs[second].state == "CANCELLED"


def test_a_submission_slurm_refused_denies_the_reservation_with_slurms_words_and_is_not_sent_again():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    refusal = "POST /slurm/v0.0.42/job/submit: HTTP 500: Invalid account or account/partition combination specified"
    actions = run(gn, [], refusals={job_name("k8s-c1", "a1"): refusal})
    assert [(d.uid, d.reason) for d in of(actions, DenyAdmission)] == [("a1", "Slurm refused the placeholder job: " + refusal)]
    assert not of(actions, SubmitPlaceholder)
    running = run(gn, [job("a1")], refusals={job_name("k8s-c1", "a1"): refusal})  # a job runs after all: it counts
    assert of(running, GrantAdmission)


def table_job(job_id, uid="a1", state="RUNNING", node="k8s-c1"):
    return PlaceholderJob(job_id, job_name(node, uid), state, "c1", 1, 1024)


def test_the_job_table_lists_once_then_reads_the_wanted_active_jobs_by_id_and_keeps_ended_ones_a_while():
    table = PlaceholderJobTable(sweep_interval=600, ended_kept=300)
    assert table.listing_due(0)
    table.listed([table_job(1), table_job(2, "a2", "PENDING"), table_job(3, "a3", "CANCELLED"), table_job(4, "b1", node="k8s-c2")], now=0)
    assert not table.listing_due(599) and table.listing_due(600)
    assert table.to_read() == [1, 2, 4]  # ended jobs are not read again
    assert table.to_read(lambda generic_node: generic_node == "k8s-c1") == [1, 2]
    table.read(1, table_job(1, state="CANCELLED"), now=10)
    table.read(2, None, now=10)  # slurmctld forgot it
    table.submitted(table_job(5, "a5", "PENDING"), now=10)
    assert sorted(j.job_id for j in table.snapshot(now=299)) == [1, 3, 4, 5]
    assert sorted(j.job_id for j in table.snapshot(now=305)) == [1, 4, 5]  # job 3 ended at 0, more than 300 s ago
    assert sorted(j.job_id for j in table.snapshot(now=311)) == [4, 5]


def test_rest_slurm_reads_its_placeholder_jobs_by_id_after_the_first_listing():
    model = FakeSlurm([FakeNode("c1", 4, 8000, gres_shared=False)])
    first = model.submit_job(job_name("k8s-c1", "a1"), "c1", 1, 1024)
    rest = FakeSlurmrestd(model, listen=False, foreign_jobs=3)
    clock = [0.0]
    slurm = rest_slurm(rest, clock=lambda: clock[0])

    def requests():
        return sorted((r.method, r.path.split("/", 3)[-1]) for r in rest.requests)  # the endpoint, after /slurm/{version}/

    assert [j.job_id for j in slurm.placeholder_jobs()] == [first]
    second = slurm.submit_placeholder(job_name("k8s-c1", "a2"), "c1", 1, 1024)
    model.end_batch_job(first, "CANCELLED")
    del model.jobs[second]  # gone from Slurm (MinJobAge)
    rest.requests.clear()
    assert {j.job_id: j.state for j in slurm.placeholder_jobs()} == {first: "CANCELLED"}  # the second forgotten
    assert requests() == [("GET", "job/%d" % first), ("GET", "job/%d" % second)]
    rest.requests.clear()
    slurm.placeholder_jobs()
    assert requests() == []  # nothing active left to read
    clock[0] = slurm.job_table.sweep_interval
    slurm.placeholder_jobs()
    assert requests() == [("GET", "jobs")]  # the sweep: one listing for jobs whose id was lost
