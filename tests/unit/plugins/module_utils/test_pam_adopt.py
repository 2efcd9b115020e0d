import pytest

from ansible_collections.hybridhpc.slurm.plugins.filter.pam_adopt import FilterModule
from ansible_collections.hybridhpc.slurm.plugins.module_utils import pam_adopt, site_inputs


@pytest.mark.parametrize("config, expected", [
    ({}, {"PrologFlags": "Contain"}),
    ({"PrologFlags": "Alloc"}, {"PrologFlags": "Alloc,Contain"}),
    ({"prologflags": "Alloc, X11"}, {"prologflags": "Alloc,X11,Contain"}),
    ({"PrologFlags": ["Alloc", "NoHold"]}, {"PrologFlags": ["Alloc", "NoHold", "Contain"]}),
    ({"PrologFlags": "Contain,Alloc"}, {"PrologFlags": "Contain,Alloc"}),
    ({"PrologFlags": ["contain"]}, {"PrologFlags": ["contain"]}),
    ({"PrologFlags": ""}, {"PrologFlags": "Contain"}),
])
def test_contain_joins_the_users_prolog_flags(config, expected):
    assert pam_adopt.with_contain(config) == expected


def test_other_keys_and_their_order_are_kept_and_the_input_is_not_modified():
    config = {"ClusterName": "c", "PrologFlags": ["Alloc"], "TaskPlugin": "task/cgroup"}
    result = pam_adopt.with_contain(config)
    assert list(result) == ["ClusterName", "PrologFlags", "TaskPlugin"]
    assert config["PrologFlags"] == ["Alloc"]


def test_disabled_leaves_the_flags_alone():
    assert pam_adopt.with_contain({"PrologFlags": "Alloc"}, False) == {"PrologFlags": "Alloc"}
    assert pam_adopt.with_contain({}, False) == {}


@pytest.mark.parametrize("config, flags", [({}, []), ({"PrologFlags": None}, []), ({"PROLOGFLAGS": "a,,b "}, ["a", "b"])])
def test_prolog_flags(config, flags):
    assert pam_adopt.prolog_flags(config) == flags


def test_filters_are_exposed():
    filters = FilterModule().filters()
    assert filters["slurm_prolog_contain"]({"PrologFlags": "X11"}, True) == {"PrologFlags": "X11,Contain"}
    assert filters["slurm_prolog_flags"]({"prologflags": "Contain"}) == ["Contain"]


def host(**overrides):
    inputs = {"host": "n1", "is_compute": True, "is_login": False, "slurm_pam_slurm_adopt": True}
    inputs.update(overrides)
    return inputs


def test_valid_inputs_have_no_problems():
    assert pam_adopt.problems(host(
        pam_slurm_adopt_action_no_jobs="deny", pam_slurm_adopt_action_unknown="newest",
        pam_slurm_adopt_action_adopt_failure="deny", pam_slurm_adopt_action_generic_failure="ignore",
        pam_slurm_adopt_log_level="info", pam_slurm_adopt_allow_users=["root", "alice.admin"],
        pam_slurm_adopt_allow_groups=["hpcadmin"], pam_slurm_adopt_access_file="/etc/security/access-x.conf",
        slurm_config={"ProctrackType": "proctrack/cgroup", "TaskPlugin": ["task/cgroup", "task/affinity"]})) == []


def test_a_login_node_running_slurmd_is_refused_with_the_fix():
    found = pam_adopt.problems(host(is_login=True))
    assert len(found) == 1
    assert found[0].startswith("slurm_pam_slurm_adopt: n1 is in group 'login' and in group 'slurmd'")
    assert "pam_slurm_adopt_enabled: false" in found[0]


@pytest.mark.parametrize("inputs", [
    host(is_login=True, pam_slurm_adopt_enabled=False),
    host(is_login=True, slurm_pam_slurm_adopt=False),
    host(is_login=True, is_compute=False),
])
def test_login_nodes_are_fine_without_the_module(inputs):
    assert pam_adopt.problems(inputs) == []


def test_the_module_without_contain_in_the_cluster_is_refused():
    found = pam_adopt.problems(host(slurm_pam_slurm_adopt=False, pam_slurm_adopt_enabled=True))
    assert found and found[0].startswith("pam_slurm_adopt_enabled: true on n1, but slurm_pam_slurm_adopt is false")


@pytest.mark.parametrize("var, value, expected", [
    ("pam_slurm_adopt_action_no_jobs", "allow", "pam_slurm_adopt_action_no_jobs: 'allow' is not one of deny, ignore"),
    ("pam_slurm_adopt_action_unknown", "oldest", "pam_slurm_adopt_action_unknown: 'oldest'"),
    ("pam_slurm_adopt_action_adopt_failure", "ignore", "pam_slurm_adopt_action_adopt_failure: 'ignore'"),
    ("pam_slurm_adopt_action_generic_failure", "no", "pam_slurm_adopt_action_generic_failure: 'no'"),
    ("pam_slurm_adopt_log_level", "loud", "pam_slurm_adopt_log_level: 'loud'"),
    ("pam_slurm_adopt_allow_users", "root", "pam_slurm_adopt_allow_users: must be a list"),
    ("pam_slurm_adopt_allow_users", ["ro ot"], "pam_slurm_adopt_allow_users[0]: 'ro ot'"),
    ("pam_slurm_adopt_allow_groups", ["(wheel)"], "pam_slurm_adopt_allow_groups[0]: '(wheel)'"),
    ("pam_slurm_adopt_allow_groups", ["ALL"], "pam_slurm_adopt_allow_groups[0]: 'ALL'"),
    ("pam_slurm_adopt_access_file", "access.conf", "pam_slurm_adopt_access_file: 'access.conf' must be an absolute path"),
    ("pam_slurm_adopt_enabled", "yes", "pam_slurm_adopt_enabled: 'yes' must be true or false"),
    ("slurm_pam_slurm_adopt", "true", "slurm_pam_slurm_adopt: 'true' must be true or false"),
    ("slurm_config", {"proctracktype": "proctrack/linuxproc"}, "slurm_config.ProctrackType: 'proctrack/linuxproc'"),
    ("slurm_config", {"TaskPlugin": "task/affinity"}, "slurm_config.TaskPlugin: 'task/affinity'"),
])
def test_bad_inputs_name_the_variable(var, value, expected):
    found = pam_adopt.problems(host(**{var: value}))
    assert any(p.startswith(expected) for p in found), found


def test_cgroup_plugins_are_not_checked_when_the_module_is_off():
    assert pam_adopt.problems(host(slurm_pam_slurm_adopt=False, slurm_config={"ProctrackType": "proctrack/pgid"})) == []


def test_site_inputs_runs_the_check_for_the_role():
    assert site_inputs.input_problems(host(is_login=True), ["pam_slurm_adopt"])


def test_contain_is_applied_by_a_reconfigure_not_a_restart():
    """slurm.conf(5) (24.11) names no restart for PrologFlags and scontrol(1) says a reconfigure re-reads all but
    ports and authentication; on the lab, Contain switched on by `scontrol reconfigure` alone gave the next job
    its extern step and pam_slurm_adopt adopted into it (extensions/molecule/accounting/verify_pam.yml)."""
    from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_conf

    old = "ClusterName=c\nSlurmctldHost=ctl\nProctrackType=proctrack/cgroup\n"
    assert not slurm_conf.needs_restart(old, old + "PrologFlags=Contain\n")
    assert not slurm_conf.needs_restart(old + "PrologFlags=Alloc\n", old + "PrologFlags=Alloc,Contain\n")
