import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_changes import cluster_change_problems, current_state


def conf(cluster, *controllers):
    return "ClusterName=%s\n" % cluster + "".join("SlurmctldHost=%s\n" % c for c in controllers)


BASE = {"cluster": "hpc", "controllers": ["ctl1"], "compute_hosts": ["c1", "c2"], "other_clusters": ["cloud"]}


def test_current_state_reads_name_and_controllers():
    assert current_state("# x\nClusterName=HPC\nSlurmctldHost=ctl1(10.0.0.1)\nSlurmctldHost=ctl2\n") == ("hpc", ["ctl1", "ctl2"])
    assert current_state("ControlMachine=old\nBackupController=old2\n") == (None, ["old", "old2"])
    assert current_state("") == (None, [])


@pytest.mark.parametrize("current", [
    {},
    {"ctl1": "", "c1": ""},
    {"ctl1": conf("hpc", "ctl1"), "c1": conf("hpc", "ctl1"), "c2": ""},
    {"ctl1": conf("HPC", "ctl1", "ctl0"), "c1": conf("hpc", "ctl0", "ctl1")},
])
def test_new_or_unchanged_clusters_pass(current):
    assert cluster_change_problems(dict(BASE, current=current)) == []


@pytest.mark.parametrize("current, var, allow", [
    ({"ctl1": conf("old", "ctl1"), "c1": conf("old", "ctl1")}, "slurm_allow_cluster_rename", "allow_cluster_rename"),
    ({"ctl1": conf("cloud", "ctl1")}, "slurm_allow_cluster_rename", "allow_cluster_rename"),
    ({"ctl1": conf("hpc", "ctl1"), "c2": conf("cloud", "cctl")}, "slurm_allow_node_move", "allow_node_move"),
    ({"ctl1": "", "c1": conf("hpc", "ctl0"), "c2": conf("hpc", "ctl0")}, "slurm_allow_controller_change", "allow_controller_change"),
])
def test_dangerous_changes_refused_unless_allowed(current, var, allow):
    problems = cluster_change_problems(dict(BASE, current=current))
    assert len(problems) == 1 and var + ": true" in problems[0], problems
    assert cluster_change_problems(dict(BASE, current=current, **{allow: True})) == []


def test_move_names_the_hosts_and_the_old_cluster():
    problems = cluster_change_problems(dict(BASE, current={"c1": conf("cloud", "cctl"), "c2": conf("cloud", "cctl")}))
    assert "c1, c2 belong to cluster 'cloud'" in problems[0]


def test_rename_and_controller_change_are_separate_opt_ins():
    current = {"ctl1": conf("old", "ctl0"), "c1": conf("hpc", "ctl0")}
    problems = cluster_change_problems(dict(BASE, current=current))
    assert len(problems) == 2
    problems = cluster_change_problems(dict(BASE, current=current, allow_cluster_rename=True))
    assert len(problems) == 1 and "slurm_allow_controller_change" in problems[0]


def test_controller_known_by_its_slurm_node_name():
    current = {"c1": conf("hpc", "ctl-a")}
    assert cluster_change_problems(dict(BASE, current=current, node_names={"ctl1": "ctl-a"})) == []
