# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-cluster decisions: every cluster of a site gets its own reconfigure, by its own controller."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest

from ansible_collections.hybridhpc.slurm.plugins.filter.cluster_plan import FilterModule, slurm_cluster_actions
from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_plan import (
    acting_controller,
    cluster_actions,
    member_states,
)

SITE = {
    "onprem": (["onprem-ctl1"], ["onprem-ctl1", "onprem-c1", "onprem-c2"]),
    "cloud": (["cloud-ctl1"], ["cloud-ctl1", "cloud-c1"]),
}
CONTROLLERS_PLAY = ["onprem-ctl1", "cloud-ctl1"]


def state(changed=False, restart=False):
    return {"slurm_common_config_changed": changed, "slurm_common_restart_required": restart}


def test_a_change_on_the_second_cluster_is_applied_by_its_own_controller():
    hostvars = {h: state() for _c, members in SITE.values() for h in members}
    hostvars["cloud-ctl1"] = state(changed=True)
    decisions = {name: slurm_cluster_actions(ctl, members, CONTROLLERS_PLAY, hostvars) for name, (ctl, members) in SITE.items()}
    assert decisions["cloud"]["actor"] == "cloud-ctl1" and decisions["cloud"]["reconfigure"]
    assert decisions["cloud"]["clear_markers"] == ["cloud-ctl1", "cloud-c1"]
    assert decisions["onprem"]["actor"] == "onprem-ctl1" and not decisions["onprem"]["reconfigure"]
    assert decisions["onprem"]["clear_markers"] == []


def test_a_compute_node_change_makes_its_cluster_reconfigure():
    hostvars = {h: state() for _c, members in SITE.values() for h in members}
    hostvars["onprem-c2"] = state(changed=True, restart=True)
    result = slurm_cluster_actions(*SITE["onprem"], CONTROLLERS_PLAY, hostvars)
    assert result["reconfigure"] and result["changed_hosts"] == ["onprem-c2"] and result["restart_hosts"] == ["onprem-c2"]


@pytest.mark.parametrize("text,expected", [("True", True), ("False", False), (" true ", True), (True, True), (False, False)])
def test_folded_set_fact_values_are_read_as_booleans(text, expected):
    assert member_states(["h"], {"h": state(changed=text)})["h"]["config_changed"] is expected


def test_members_this_run_did_not_reach_keep_their_marker():
    # --limit onprem-ctl1,onprem-c1: onprem-c2 has no state, its files were not rendered.
    hostvars = {"onprem-ctl1": state(changed=True), "onprem-c1": state(), "onprem-c2": {}}
    result = slurm_cluster_actions(*SITE["onprem"], ["onprem-ctl1"], hostvars)
    assert result["reconfigure"] and result["clear_markers"] == ["onprem-ctl1", "onprem-c1"]


def test_no_controller_in_the_run_means_nothing_is_applied_and_markers_stay():
    hostvars = {"onprem-c1": state(changed=True)}
    result = slurm_cluster_actions(*SITE["onprem"], [], hostvars)
    assert result == {"actor": None, "reconfigure": False, "clear_markers": [], "changed_hosts": ["onprem-c1"], "restart_hosts": []}


def test_the_first_controller_of_the_run_acts_for_an_ha_pair():
    assert acting_controller(["a-ctl1", "a-ctl2"], ["b-ctl1", "a-ctl2", "a-ctl1"]) == "a-ctl1"
    assert acting_controller(["a-ctl1", "a-ctl2"], ["a-ctl2"]) == "a-ctl2"
    assert acting_controller(["a-ctl1"], ["b-ctl1"]) is None


def test_nothing_changed_nothing_to_do():
    result = cluster_actions(["c"], ["c", "n"], ["c"], {"c": {"config_changed": False}, "n": {"config_changed": False}})
    assert not result["reconfigure"] and result["clear_markers"] == []
    assert "slurm_cluster_actions" in FilterModule().filters()


def test_nodes_dropped_from_the_model_are_the_ones_leaving():
    from ansible_collections.hybridhpc.slurm.plugins.filter.cluster_plan import slurm_nodes_leaving

    records = [{"NodeName": "c[1-2]", "CPUs": 2}, {"nodename": ["gpu1"], "CPUs": 8}, {"NodeName": "DEFAULT", "CPUs": 1}]
    assert slurm_nodes_leaving("c1\nc2\nc3\ngpu1\ngpu2\n", records) == ["c3", "gpu2"]
    assert slurm_nodes_leaving(["c1", "c2", "gpu1"], records) == []
    assert slurm_nodes_leaving("", records) == []
    assert slurm_nodes_leaving("c3\nc3\nc1\n", records) == ["c3"]  # one line per partition


@pytest.mark.parametrize("state,cluster,expected", [
    ("beta\n", "gamma", "beta"),
    ("on-perm|2788\n", "on-perm", None),  # 24.11: "name|cluster id"
    ("beta|123", "gamma", "beta"),
    ("beta\n", "beta", None),
    ("Beta", "beta", None),  # Slurm lowercases ClusterName
    ("", "beta", None),  # a new controller: no state yet
    (None, "beta", None),
])
def test_a_rename_is_state_of_another_cluster_name(state, cluster, expected):
    from ansible_collections.hybridhpc.slurm.plugins.filter.cluster_plan import slurm_cluster_renamed_from

    assert slurm_cluster_renamed_from(state, cluster) == expected


def test_members_of_each_cluster_in_inventory_order():
    from ansible_collections.hybridhpc.slurm.plugins.filter.cluster_plan import slurm_cluster_members

    groups = {
        "all": ["on-ctl1", "on-c1", "on-c2", "cl-ctl1", "cl-c1", "login1", "rtr"],
        "slurmctld": ["cl-ctl1", "on-ctl1"], "slurmdbd": ["on-ctl1"], "slurmd": ["on-c2", "on-c1", "cl-c1"],
        "login": ["login1"], "slurmrestd": ["on-ctl1", "cl-ctl1"],
    }
    hostvars = {h: {"slurm_cluster_name": "on-perm"} for h in ("on-ctl1", "on-c1", "on-c2", "login1")}
    hostvars.update({h: {"slurm_cluster_name": "cloud"} for h in ("cl-ctl1", "cl-c1")})
    hostvars["rtr"] = {}
    hostvars["on-c1"].update(slurm_k8s_shared=True)
    hostvars["on-c2"].update(slurm_k8s_shared="true", slurm_k8s_strategy="placeholder")
    onprem = slurm_cluster_members("on-perm", groups, hostvars)
    assert onprem == {
        "name": "on-perm", "hosts": ["on-ctl1", "on-c1", "on-c2", "login1"], "controllers": ["on-ctl1"],
        "dbd_hosts": ["on-ctl1"], "compute_hosts": ["on-c2", "on-c1"], "login_hosts": ["login1"],
        "rest_hosts": ["on-ctl1"], "k8s_shared_hosts": ["on-c2", "on-c1"], "k8s_gres_hosts": ["on-c1"],
    }
    cloud = slurm_cluster_members("cloud", groups, hostvars)
    # No slurmdbd of its own: the shared one (a federation's single dbd).
    assert cloud["controllers"] == ["cl-ctl1"] and cloud["dbd_hosts"] == ["on-ctl1"] and cloud["login_hosts"] == []
    assert slurm_cluster_members("cloud", groups, hostvars, ["db9"])["dbd_hosts"] == ["db9"]
    assert slurm_cluster_members("none", groups, hostvars)["hosts"] == []


class CountingHostvars(dict):
    """hostvars that count reads: each costs Ansible a full variable computation."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = []

    def __getitem__(self, host):
        self.reads.append(host)
        return super().__getitem__(host)


def test_each_cluster_is_planned_by_its_first_controller_in_the_play():
    from ansible_collections.hybridhpc.slurm.plugins.filter.cluster_plan import slurm_cluster_planner

    groups = {"slurmctld": ["cl-ctl1", "on-ctl1", "on-ctl2"], "slurmd": ["on-c%d" % i for i in range(100)]}
    hostvars = CountingHostvars({h: {"slurm_cluster_name": "onprem"} for h in ("on-ctl1", "on-ctl2")})
    hostvars.update({"cl-ctl1": {"slurm_cluster_name": "cloud"}})
    hostvars.update({h: {"slurm_cluster_name": "onprem"} for h in groups["slurmd"]})
    everyone = list(hostvars)
    assert slurm_cluster_planner("onprem", groups, hostvars, everyone) == "on-ctl1"
    assert slurm_cluster_planner("cloud", groups, hostvars, everyone) == "cl-ctl1"
    # Only controllers are read, never the (many) compute hosts.
    assert set(hostvars.reads) <= set(groups["slurmctld"])
    # --limit: the HA partner plans; no controller of the cluster in the play, nobody does.
    assert slurm_cluster_planner("onprem", groups, hostvars, ["on-ctl2", "on-c1"]) == "on-ctl2"
    assert slurm_cluster_planner("onprem", groups, hostvars, ["on-c1", "cl-ctl1"]) is None
    assert slurm_cluster_planner("lost", groups, hostvars, everyone) is None
