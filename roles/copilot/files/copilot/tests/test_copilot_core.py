"""core.reconcile, rule by rule."""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
import sys

import pytest
from copilot_builders import NOW, admission, entry, generic_node, observed, of, pod, slurm_node, status_of

from hybridhpc_copilot import core, names, placeholder
from hybridhpc_copilot.core import (
    AddFinalizer,
    AnnotateNode,
    Capacity,
    DenyAdmission,
    DrainNode,
    GrantAdmission,
    KubeNode,
    ReleaseAdmission,
    RemoveFinalizer,
    ReserveAdmission,
    ResumeNode,
    SetGres,
    WriteStatus,
    reconcile,
)
from hybridhpc_copilot.executor import Executor
from hybridhpc_copilot.kube import generic_node_from_api

GRANTED, RESERVED, DENIED, RELEASED = names.GRANTED, names.RESERVED, names.DENIED, names.RELEASED


def ledger(actions):
    return status_of(actions)[names.STATUS_ADMISSIONS]


# -- admissions ------------------------------------------------------------------------


def test_a_fitting_admission_is_reserved_and_the_gres_lowered_ledger_first():
    actions = reconcile(observed([generic_node(admissions=[admission("a1")])], [pod()], [slurm_node()]))
    assert [a.kind for a in actions] == ["ReserveAdmission", "WriteStatus", "SetGres"]
    entry_ = ledger(actions)["a1"]
    assert entry_["state"] == RESERVED
    assert entry_["pod"] == {"namespace": "default", "name": "p1", "uid": "pod-uid-p1"}
    assert entry_["request"] == {"cpu": "1", "memory": "1Gi"}
    assert entry_["lastTransitionTime"] == core.timestamp(NOW)
    gres = of(actions, SetGres)[0]
    assert (gres.slurm_node, gres.gres, gres.counts) == ("c1", "k8scpu:3,k8smemory:6976", (3, 6976))
    status = status_of(actions)
    assert status[names.STATUS_SLURM] == {"node": "c1", "configuredGres": "k8scpu:4,k8smemory:8000",
                                          "wantedGres": "k8scpu:3,k8smemory:6976"}
    assert status[names.STATUS_ALLOCATED] == [
        {"allocated": {"cpu": "0", "memory": "0"}, "type": "Slurm"},
        {"allocated": {"cpu": "1", "memory": "1Gi"}, "type": "Kubernetes"},
    ]


def test_a_reservation_is_granted_once_slurm_shows_the_lowered_gres():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    actions = reconcile(observed([gn], [pod()], [slurm_node(cpu=3, mem=6976, used_cpu=2, used_mem=100)]))
    assert of(actions, GrantAdmission)[0].uid == "a1"
    assert ledger(actions)["a1"]["state"] == GRANTED
    assert ledger(actions)["a1"]["reason"] == "Slurm GRES lowered to k8scpu:3,k8smemory:6976"
    assert not of(actions, SetGres)


def test_a_reservation_waits_while_slurm_still_shows_the_old_gres_and_the_gres_is_sent_again():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    actions = reconcile(observed([gn], [pod()], [slurm_node()]))
    assert not of(actions, GrantAdmission) and not of(actions, DenyAdmission)
    assert of(actions, SetGres)[0].counts == (3, 6976)


def test_a_reservation_slurm_does_not_take_in_time_is_denied():
    gn = generic_node(admissions=[admission("a1")],
                      status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED, since=NOW - 61)}})
    actions = reconcile(observed([gn], [pod()], [slurm_node()], reservation_timeout=60))
    assert of(actions, DenyAdmission)[0].reason == "Slurm did not take the lowered GRES within 60s"
    assert ledger(actions)["a1"]["state"] == DENIED
    assert not of(actions, SetGres)  # nothing held: the counts stay at the configured ones


def test_when_slurm_got_there_first_the_newest_reservations_are_denied_until_the_rest_fits():
    gn = generic_node(
        admissions=[admission("a1", pod="p1"), admission("a2", pod="p2")],
        status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED, pod="p1"), "a2": entry(RESERVED, pod="p2", uid="pod-uid-p2")}},
    )
    # Slurm took 3 CPUs before the GRES went down to 2: only one 1-CPU reservation fits.
    actions = reconcile(observed([gn], [pod("p1"), pod("p2")], [slurm_node(cpu=2, mem=5952, used_cpu=3)]))
    assert [d.uid for d in of(actions, DenyAdmission)] == ["a2"]
    assert ledger(actions)["a1"]["state"] == RESERVED
    assert ledger(actions)["a2"]["state"] == DENIED
    assert of(actions, SetGres)[0].counts == (3, 6976)


@pytest.mark.parametrize(
    ("request_", "usage", "reason"),
    [
        ({"cpu": "2", "memory": "1Gi"}, (3, 0), "insufficient cpu: requested 2, free 1 of 4 (Slurm 3, Kubernetes 0)"),
        ({"cpu": "1", "memory": "8Gi"}, (0, 0), "insufficient memory: requested 8Gi, free 8000Mi of 8000Mi (Slurm 0Mi, Kubernetes 0)"),
        ({"cpu": "4500m", "memory": "9000Mi"}, (0, 0), "insufficient cpu: requested 4500m, free 4 of 4 (Slurm 0, Kubernetes 0); "
         "memory: requested 9000Mi, free 8000Mi of 8000Mi (Slurm 0Mi, Kubernetes 0)"),
    ],
)
def test_an_admission_that_does_not_fit_is_denied_with_the_numbers(request_, usage, reason):
    adm = {"uid": "a1", "pod": {"namespace": "default", "name": "p1"}, "request": request_}
    actions = reconcile(observed([generic_node(admissions=[adm])], [pod()], [slurm_node(used_cpu=usage[0], used_mem=usage[1])]))
    assert of(actions, DenyAdmission)[0].reason == reason
    assert ledger(actions)["a1"]["state"] == DENIED
    assert not of(actions, SetGres)


def test_kubernetes_share_is_rounded_up_to_whole_cpus_and_mib():
    gn = generic_node(
        admissions=[admission("a1", cpu="2735m", memory="3417Mi"), admission("a2", pod="p2", cpu="1", memory="1")],
        status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED, cpu="2735m", memory="3417Mi")}},
    )
    # 2735m + 1 = 3735m -> 4 CPUs; Slurm holds 1: 1 + 4 > 4 -> denied though 265m are "free".
    actions = reconcile(observed([gn], [pod("p1"), pod("p2")], [slurm_node(cpu=1, mem=4583, used_cpu=1)]))
    assert of(actions, DenyAdmission)[0].reason.startswith("insufficient cpu: requested 1, free 265m of 4")
    status = status_of(actions)
    assert status[names.STATUS_ALLOCATED] == [
        {"allocated": {"cpu": "1", "memory": "0"}, "type": "Slurm"},
        {"allocated": {"cpu": "2735m", "memory": "3417Mi"}, "type": "Kubernetes"},
    ]
    assert status[names.STATUS_SLURM]["wantedGres"] == "k8scpu:1,k8smemory:4583"


def test_allocated_resources_look_like_acks():
    gn = generic_node(admissions=[admission("a1", cpu="2735m", memory="3417Mi")],
                      status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED, cpu="2735m", memory="3417Mi")}})
    actions = reconcile(observed([gn], [pod()], [slurm_node(cpu=1, mem=4583, used_cpu=1, used_mem=4000)],
                                 configured={"c1": Capacity(4, 8000)}))
    assert status_of(actions)[names.STATUS_ALLOCATED] == [
        {"allocated": {"cpu": "1", "memory": "4000Mi"}, "type": "Slurm"},
        {"allocated": {"cpu": "2735m", "memory": "3417Mi"}, "type": "Kubernetes"},
    ]


@pytest.mark.parametrize(
    ("pods", "adm", "reason"),
    [
        ([], admission("a1"), "pod default/p1 not found"),
        ([pod(uid="other")], admission("a1", pod_uid="mine"), "pod default/p1 has uid other, not mine"),
        ([pod(phase="Succeeded")], admission("a1"), "pod default/p1 is Succeeded"),
        ([pod()], {"uid": "a1", "pod": {"namespace": "default", "name": "p1"}, "request": {"cpu": "lots"}},
         "invalid admission request: 'lots' is not a Kubernetes quantity (examples: 2, 500m, 1.5, 2Gi, 4000Mi)"),
        ([pod()], {"uid": "a1", "pod": {"name": "p1"}}, "invalid admission: pod.namespace and pod.name are required"),
        ([pod()], {"uid": "a1", "pod": {"namespace": "default", "name": "p1"}, "request": {"cpu": "-1"}},
         "invalid admission request: a CPU quantity must not be negative, got '-1'"),
    ],
)
def test_admissions_that_cannot_be_honoured_are_denied(pods, adm, reason):
    actions = reconcile(observed([generic_node(admissions=[adm])], pods, [slurm_node()]))
    assert [(d.uid, d.reason) for d in of(actions, DenyAdmission)] == [("a1", reason)]
    assert ledger(actions)["a1"]["state"] == DENIED


def test_an_admission_without_uid_is_ignored():
    actions = reconcile(observed([generic_node(admissions=[{"pod": {"namespace": "d", "name": "p"}}])], [], [slurm_node()]))
    assert not of(actions, DenyAdmission) and not of(actions, ReserveAdmission)


def test_admissions_are_decided_in_spec_order_against_what_earlier_ones_took():
    adms = [admission("a%d" % i, pod="p%d" % i, cpu="1500m", memory="1Mi") for i in range(3)]
    actions = reconcile(observed([generic_node(admissions=adms)], [pod("p%d" % i) for i in range(3)], [slurm_node()]))
    assert [a.uid for a in of(actions, ReserveAdmission)] == ["a0", "a1"]
    assert [a.uid for a in of(actions, DenyAdmission)] == ["a2"]
    assert of(actions, SetGres)[0].counts == (1, 7998)


def test_nothing_that_depends_on_slurm_is_decided_while_slurm_cannot_be_read():
    gn = generic_node(admissions=[admission("a1"), admission("a2", pod="p2")],
                      status={names.STATUS_ADMISSIONS: {"a2": entry(RESERVED, pod="p2", uid="pod-uid-p2", since=NOW - 999)}})
    actions = reconcile(observed([gn], [pod(), pod("p2")], slurm_down=True))
    assert not [a for a in actions if isinstance(a, (ReserveAdmission, DenyAdmission, GrantAdmission, SetGres))]


def test_unknown_or_unshared_slurm_nodes_deny():
    actions = reconcile(observed([generic_node(admissions=[admission("a1")])], [pod()], [slurm_node(name="c9")]))
    assert of(actions, DenyAdmission)[0].reason == "Slurm has no node c1"
    bare = core.SlurmNode(name="c1", gres="gpu:2")
    actions = reconcile(observed([generic_node(admissions=[admission("a1")])], [pod()], [bare]))
    assert of(actions, DenyAdmission)[0].reason == "Slurm node c1 has no k8scpu/k8smemory GRES: it is not shared"
    assert not of(actions, SetGres)


# -- releases ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "reason"),
    [([], "pod deleted"), ([pod(uid="new")], "pod replaced by another with the same name"), ([pod(phase="Failed")], "pod Failed")],
)
def test_a_granted_admission_is_released_when_its_pod_goes_and_slurm_gets_the_gres_back(pods, reason):
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    actions = reconcile(observed([gn], pods, [slurm_node(cpu=3, mem=6976)]))
    assert [(r.uid, r.reason) for r in of(actions, ReleaseAdmission)] == [("a1", reason)]
    assert ledger(actions)["a1"]["state"] == RELEASED
    assert of(actions, SetGres)[0].counts == (4, 8000)
    assert [a.kind for a in actions] == ["ReleaseAdmission", "WriteStatus", "SetGres"]


def test_an_admission_removed_from_the_spec_is_forgotten_and_released():
    gn = generic_node(admissions=[], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED), "a2": entry(DENIED)}})
    actions = reconcile(observed([gn], [pod()], [slurm_node(cpu=3, mem=6976)]))
    assert [r.uid for r in of(actions, ReleaseAdmission)] == ["a1"]  # a denied one held nothing
    assert ledger(actions) == {}
    assert of(actions, SetGres)[0].counts == (4, 8000)


def test_a_terminating_pod_keeps_its_resources():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    terminating = core.Pod("default", "p1", "pod-uid-p1", "Running", terminating=True)
    actions = reconcile(observed([gn], [terminating], [slurm_node(cpu=3, mem=6976)]))
    assert not of(actions, ReleaseAdmission) and not of(actions, SetGres)


# -- the gres -------------------------------------------------------------------------------


def test_a_converged_node_needs_nothing():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    first = reconcile(observed([gn], [pod()], [slurm_node(cpu=3, mem=6976)]))
    gn["status"] = status_of(first)
    assert reconcile(observed([gn], [pod()], [slurm_node(cpu=3, mem=6976)])) == []


def test_a_reverted_gres_is_reasserted_without_touching_the_ledger():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    gn["status"] = status_of(reconcile(observed([gn], [pod()], [slurm_node(cpu=3, mem=6976)])))
    actions = reconcile(observed([gn], [pod()], [slurm_node(cpu=4, mem=8000)]))  # scontrol reconfigure
    assert [a.kind for a in actions] == ["SetGres"]
    assert actions[0].counts == (3, 6976)


def test_slurm_jobs_started_in_a_revert_window_keep_the_count_above_their_usage_and_show_overcommitted():
    gn = generic_node(admissions=[admission("a1"), admission("a2", pod="p2")],
                      status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED, cpu="2")}})
    actions = reconcile(observed([gn], [pod(), pod("p2")], [slurm_node(cpu=4, mem=8000, used_cpu=3)]))
    gres = of(actions, SetGres)[0]
    assert gres.counts == (2, 6976)  # under Slurm's 3: Slurm starts nothing more until its jobs fit
    assert gres.fallback == "k8scpu:3,k8smemory:6976"  # if Slurm refuses a count under its usage
    assert of(actions, DenyAdmission)[0].uid == "a2"
    condition = status_of(actions)[names.STATUS_CONDITIONS][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Overcommitted", "True", "SlurmUsedKubernetesShare")


def test_other_gres_are_kept_when_the_gres_string_is_replaced():
    node = slurm_node(other="gpu:a100:2(S:0-1)")
    actions = reconcile(observed([generic_node(admissions=[admission("a1")])], [pod()], [node]))
    assert of(actions, SetGres)[0].gres == "gpu:a100:2,k8scpu:3,k8smemory:6976"


def test_the_count_is_never_set_above_the_configured_one():
    # A ledger claiming more than the node has (edited by hand) cannot push counts below 0 or above the cap.
    gn = generic_node(admissions=[admission("a1", cpu="64")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED, cpu="64")}})
    actions = reconcile(observed([gn], [pod()], [slurm_node()]))
    assert of(actions, SetGres)[0].counts == (0, 6976)
    for used in range(0, 9):
        for action in of(reconcile(observed([generic_node()], [], [slurm_node(cpu=2, used_cpu=used)])), SetGres):
            assert action.counts[0] <= 4


def test_without_configured_counts_the_capacity_is_the_larger_of_the_recorded_and_the_current_counts():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    gn["status"][names.STATUS_SLURM] = {"node": "c1", "configuredGres": "k8scpu:4,k8smemory:8000"}
    actions = reconcile(observed([gn], [pod()], [slurm_node(cpu=3, mem=6976)], configured={}))
    assert not of(actions, SetGres)
    assert status_of(actions)[names.STATUS_SLURM]["configuredGres"] == "k8scpu:4,k8smemory:8000"
    fresh = generic_node(admissions=[admission("a1")])
    actions = reconcile(observed([fresh], [pod()], [slurm_node(cpu=6, mem=100)], configured={}))
    assert status_of(actions)[names.STATUS_SLURM]["configuredGres"] == "k8scpu:6,k8smemory:100"
    assert of(actions, DenyAdmission)  # 1Gi > 100 MB


def test_usage_source_max_counts_jobs_without_gres():
    adm = admission("a1", cpu="2", memory="1Mi")
    node = slurm_node(used_cpu=0, alloc_cpus=3)
    assert of(reconcile(observed([generic_node(admissions=[adm])], [pod()], [node])), DenyAdmission)
    assert of(reconcile(observed([generic_node(admissions=[adm])], [pod()], [node], usage_source="gres")), ReserveAdmission)


def test_unshared_configured_nodes_get_their_counts_back():
    actions = reconcile(observed([], [], [slurm_node(cpu=1, mem=10)]))
    assert [(a.node, a.counts) for a in of(actions, SetGres)] == [(None, (4, 8000))]
    assert reconcile(observed([], [], [slurm_node()])) == []


def test_two_generic_nodes_for_one_slurm_node_only_the_first_shares_it():
    first = generic_node(name="a", admissions=[admission("a1")])
    second = generic_node(name="b", admissions=[admission("b1", pod="p2")])
    actions = reconcile(observed([first, second], [pod(), pod("p2")], [slurm_node()]))
    assert of(actions, DenyAdmission)[0].reason == "Slurm node c1 is shared through GenericNode a"
    assert [a.node for a in of(actions, SetGres)] == ["a"]


def test_generic_nodes_of_another_type_are_left_alone():
    assert reconcile(observed([generic_node(node_type="Other", admissions=[admission("a1")])], [pod()], [slurm_node()])) == []


def test_unknown_status_fields_survive():
    gn = generic_node(admissions=[admission("a1")], status={"ackField": {"x": 1}})
    assert status_of(reconcile(observed([gn], [pod()], [slurm_node()])))["ackField"] == {"x": 1}


# -- finalizer and deletion -------------------------------------------------------------------


def test_the_finalizer_is_added_before_the_first_ledger_write():
    actions = reconcile(observed([generic_node(finalizers=(), admissions=[admission("a1")])], [pod()], [slurm_node()]))
    kinds = [a.kind for a in actions]
    assert kinds.index("AddFinalizer") < kinds.index("WriteStatus")
    assert not of(reconcile(observed([generic_node(finalizers=())], [], [slurm_node()], manage_finalizer=False)), AddFinalizer)


def test_a_deleted_generic_node_waits_for_its_pods_then_restores_slurm_then_lets_go():
    held = generic_node(deleting=True, admissions=[admission("a1"), admission("a2", pod="p2")],
                        status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})
    actions = reconcile(observed([held], [pod(), pod("p2")], [slurm_node(cpu=3, mem=6976)]))
    assert of(actions, DenyAdmission)[0].reason == "GenericNode k8s-c1 is being deleted"
    assert not of(actions, RemoveFinalizer)
    released = generic_node(deleting=True, status={names.STATUS_ADMISSIONS: {}})
    actions = reconcile(observed([released], [], [slurm_node(cpu=3, mem=6976)]))
    assert of(actions, SetGres)[0].counts == (4, 8000) and not of(actions, RemoveFinalizer)
    actions = reconcile(observed([released], [], [slurm_node()]))
    assert of(actions, RemoveFinalizer)
    assert not of(reconcile(observed([released], [], slurm_down=True)), RemoveFinalizer)


# -- drains --------------------------------------------------------------------------------------


def drain_actions(unschedulable, states=("IDLE",), reason="", annotation=None):
    annotations = {names.ANNOTATION_SLURM_DRAIN_REASON: annotation} if annotation else {}
    kube = KubeNode("k8s-c1", unschedulable, annotations)
    actions = reconcile(observed([generic_node(status={})], [], [slurm_node(states=states, reason=reason)], [kube]))
    return [a for a in actions if isinstance(a, (DrainNode, ResumeNode, AnnotateNode))]


def test_a_cordoned_kubernetes_node_drains_slurm_with_the_copilot_prefix():
    (drain,) = drain_actions(True)
    assert drain == DrainNode("k8s-c1", "c1", "copilot: Kubernetes node k8s-c1 is cordoned")


def test_uncordon_resumes_only_the_copilots_drain():
    assert drain_actions(False, ("IDLE", "DRAIN"), "copilot: Kubernetes node k8s-c1 is cordoned") == [ResumeNode("k8s-c1", "c1")]
    assert drain_actions(True, ("IDLE", "DRAIN"), "copilot: x") == []


def test_a_drain_somebody_else_set_is_annotated_never_resumed():
    assert drain_actions(False, ("IDLE", "DRAIN"), "bad DIMM") == [
        AnnotateNode("k8s-c1", "k8s-c1", names.ANNOTATION_SLURM_DRAIN_REASON, "bad DIMM")]
    assert drain_actions(True, ("IDLE", "DRAIN"), "bad DIMM", annotation="bad DIMM") == []
    assert drain_actions(False, ("IDLE",), "", annotation="bad DIMM") == [
        AnnotateNode("k8s-c1", "k8s-c1", names.ANNOTATION_SLURM_DRAIN_REASON, None)]


def test_drain_sync_can_be_turned_off():
    kube = KubeNode("k8s-c1", True, {})
    actions = reconcile(observed([generic_node(status={})], [], [slurm_node()], [kube], drain_sync=False))
    assert not of(actions, DrainNode)


def test_pods_needed_names_new_and_held_admissions_only():
    gn = generic_node(admissions=[admission("a1", pod="new"), admission("a2", pod="held"), admission("a3", pod="done")],
                      status={names.STATUS_ADMISSIONS: {"a2": entry(GRANTED, pod="held"), "a3": entry(DENIED, pod="done")}})
    assert core.pods_needed(generic_node_from_api(gn)) == {("default", "new"), ("default", "held")}


def test_every_action_has_a_kind_and_decisions_write_nothing():
    assert WriteStatus("n", "1", {}).writes and not GrantAdmission("n", "u", "r").writes
    assert SetGres("n", "c1", "k8scpu:1", (1, 1), "r").kind == "SetGres"


def test_every_action_that_writes_has_an_executor_handler():
    def kinds(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from kinds(sub)

    writing = {cls for cls in kinds(core.Action) if not issubclass(cls, core.Decision)}
    assert placeholder.SubmitPlaceholder in writing  # the strategies' actions are found too
    assert writing <= set(Executor(None, None, None)._handlers)


def test_the_strategies_do_not_import_core():
    code = ("import sys; import hybridhpc_copilot.gres, hybridhpc_copilot.placeholder; "
            "print('hybridhpc_copilot.core' in sys.modules)")
    src = str(pathlib.Path(core.__file__).parents[1])
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": src}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- refused slurmd registrations ------------------------------------------------------------

REFUSED = "gres/k8scpu count changed and jobs are using them (4 != 3)"


def granted_node():
    return generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(GRANTED)}})


def test_a_refused_registration_keeps_the_counts_and_the_drain_while_jobs_hold_the_gres():
    # slurmd registered with slurm.conf's counts; the copilot lowered them while a job ran; slurmd restarted.
    refused = slurm_node(cpu=3, mem=6976, used_cpu=3, used_mem=1000, states=("MIXED", "DRAIN", "INVALID_REG"),
                         reason=REFUSED)
    assert refused.registration_refused == ("k8scpu", 4)
    for node in (refused, dataclasses.replace(refused, states=("MIXED", "DRAIN"))):  # registered again, job still on
        actions = reconcile(observed([granted_node()], [pod()], [node], [KubeNode("k8s-c1")]))
        assert not of(actions, SetGres) and not of(actions, ResumeNode) and not of(actions, AnnotateNode)


def test_the_drain_a_refusal_caused_is_resumed_once_the_node_registered_and_no_job_holds_the_gres():
    node = slurm_node(cpu=3, mem=6976, states=("IDLE", "DRAIN"), reason=REFUSED)
    assert of(reconcile(observed([granted_node()], [pod()], [node], [KubeNode("k8s-c1")])), ResumeNode)
    assert of(reconcile(observed([granted_node()], [pod()], [node], drain_sync=False)), ResumeNode)
    for waiting in (dataclasses.replace(node, states=("IDLE", "DRAIN", "INVALID_REG")),  # not registered yet
                    dataclasses.replace(node, states=("IDLE", "DRAIN", "NOT_RESPONDING"))):  # registration asked for
        assert not of(reconcile(observed([granted_node()], [pod()], [waiting], [KubeNode("k8s-c1")])), ResumeNode)
    assert not of(reconcile(observed([granted_node()], [pod()], [node], [KubeNode("k8s-c1", True)])), ResumeNode)


def test_a_refusal_hidden_behind_another_drain_reason_is_left_to_the_admin():
    node = slurm_node(cpu=3, mem=6976, states=("IDLE", "DRAIN", "INVALID_REG"), reason="bad DIMM")
    actions = reconcile(observed([granted_node()], [pod()], [node], [KubeNode("k8s-c1")]))
    assert not of(actions, ResumeNode)
    assert of(actions, AnnotateNode)[0].value == "bad DIMM"


# -- a Slurm node that vanished -------------------------------------------------------------


def missing_condition(actions):
    conditions = status_of(actions)[names.STATUS_CONDITIONS]
    return next(c for c in conditions if c["type"] == names.CONDITION_SLURM_NODE_MISSING)


def test_a_slurm_node_that_vanished_keeps_grants_and_reservations_until_the_timeout_and_shows_a_condition():
    held = {"a1": entry(GRANTED), "a2": entry(RESERVED, pod="p2", uid="pod-uid-p2", since=NOW - 30)}
    gn = generic_node(admissions=[admission("a1"), admission("a2", pod="p2")], status={names.STATUS_ADMISSIONS: held})
    actions = reconcile(observed([gn], [pod(), pod("p2")], [slurm_node(name="c9")], reservation_timeout=60))
    assert {uid: e["state"] for uid, e in ledger(actions).items()} == {"a1": GRANTED, "a2": RESERVED}
    assert not [a for a in actions if isinstance(a, (DenyAdmission, ReleaseAdmission, SetGres, RemoveFinalizer))]
    missing = missing_condition(actions)
    assert (missing["status"], missing["reason"]) == ("True", "NotInSlurm") and "no node c1 (spec.alias)" in missing["message"]
    late = reconcile(observed([gn], [pod(), pod("p2")], [slurm_node(name="c9")], reservation_timeout=20))
    assert [(d.uid, d.reason) for d in of(late, DenyAdmission)] == [("a2", "Slurm has had no node c1 for 20s")]


def test_the_missing_condition_goes_false_once_the_node_is_back_and_never_appears_on_nodes_slurm_always_had():
    gone = reconcile(observed([generic_node()], [], [slurm_node(name="c9")]))
    back = reconcile(observed([generic_node(status=status_of(gone))], [], [slurm_node()]))
    assert (missing_condition(back)["status"], missing_condition(back)["reason"]) == ("False", "InSlurm")
    always = status_of(reconcile(observed([generic_node()], [], [slurm_node()])))
    assert names.CONDITION_SLURM_NODE_MISSING not in [c["type"] for c in always.get(names.STATUS_CONDITIONS) or []]
    unread = reconcile(observed([generic_node(status=status_of(gone))], [], slurm_down=True))
    assert not of(unread, WriteStatus)  # Slurm unread: the condition stays as recorded


def test_a_node_slurm_lists_without_the_shared_gres_denies_its_reservations_at_once():
    gn = generic_node(admissions=[admission("a1")], status={names.STATUS_ADMISSIONS: {"a1": entry(RESERVED)}})
    actions = reconcile(observed([gn], [pod()], [core.SlurmNode(name="c1", gres="gpu:2")], configured={}))
    assert [d.uid for d in of(actions, DenyAdmission)] == ["a1"]
