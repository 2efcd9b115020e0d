# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Elastic node sets and configless mode in a cluster's model (module_utils/elastic.py)."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest

from ansible_collections.hybridhpc.slurm.plugins.filter.elastic import slurm_elastic_plan, slurm_power_tool_config
from ansible_collections.hybridhpc.slurm.plugins.filter.slurm_conf import slurm_conf_render
from ansible_collections.hybridhpc.slurm.plugins.module_utils import elastic
from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_plan import controllers_restart
from ansible_collections.hybridhpc.slurm.plugins.module_utils.site_inputs import input_problems
from ansible_collections.hybridhpc.slurm.plugins.module_utils.slurm_conf import render_settings


def dockerset(**over):
    nodeset = {
        "name": "dy",
        "nodes": "cloud-dy-[1-4]",
        "node": {"CPUs": 1, "RealMemory": 1000, "Features": ["dynamic"], "Weight": 10},
        "provider": "docker",
        "options": {"image": "hybridhpc/slurm-lab-node:x", "network": "hybridhpc-cloud"},
    }
    nodeset.update(over)
    return nodeset


CONFIG = {"ClusterName": "cloud", "SlurmctldHost": ["cloud-ctl1"], "ReturnToService": 2}


def test_valid_inputs_have_no_problems():
    assert elastic.elastic_problems([dockerset()], {"SuspendTime": 60}, None, ["cloud-c1"]) == []


@pytest.mark.parametrize("nodeset, fragment", [
    (dockerset(name="Dy"), "slurm_elastic_nodesets[0].name"),
    (dockerset(nodes="cloud-dy-[1-"), "slurm_elastic_nodesets[0].nodes: 'cloud-dy-[1-' is not a Slurm hostlist"),
    (dockerset(nodes=""), "slurm_elastic_nodesets[0].nodes: missing"),
    (dockerset(nodes="cloud-c1"), "cloud-c1 is also an always-on node"),
    (dockerset(node={"CPUs": 2}), "slurm_elastic_nodesets[0].node.RealMemory: missing"),
    (dockerset(node={"CPUs": "two", "RealMemory": 1}), "node.CPUs: 'two' must be a whole number"),
    (dockerset(node={"CPUs": 1, "RealMemory": 1, "State": "CLOUD"}), "remove State"),
    (dockerset(node=None), "slurm_elastic_nodesets[0].node: give the nodes' Slurm parameters"),
    (dockerset(provider="gcp"), "provider: 'gcp' is not one of docker, aws, command"),
    (dockerset(options={"network": "n"}), "options.image: the docker provider needs it"),
    (dockerset(provider="aws", options={"region": "eu-west-1"}), "options.launch_template: the aws provider needs it"),
    (dockerset(provider="aws", options={"region": "r", "launch_template": "lt"}), "options.munge_key_parameter: the aws provider needs it"),
    (dockerset(provider="command", options={"resume_command": "up.sh", "suspend_command": ["/bin/down"]}),
     "options.resume_command: give the command as a list whose first item is an absolute path"),
    (dockerset(options={"image": "i", "network": "n", "aws_secret_access_key": "x"}), "secrets do not belong"),
    (dockerset(extra=1), "unknown keys extra"),
])
def test_bad_node_sets_name_the_variable_and_the_fix(nodeset, fragment):
    problems = elastic.elastic_problems([nodeset], {}, None, ["cloud-c1"])
    assert any(fragment in p for p in problems), problems


def test_node_sets_must_not_overlap_or_share_a_name():
    problems = elastic.elastic_problems([dockerset(), dockerset(nodes="cloud-dy-[4-5]")], {}, None, [])
    assert any("name: 'dy' is used twice" in p for p in problems)
    assert any("cloud-dy-4 is also in slurm_elastic_nodesets[0]" in p for p in problems)


@pytest.mark.parametrize("power_save, fragment", [
    ({"SuspendTime": "soon"}, "slurm_power_save.SuspendTime: 'soon' must be a whole number of seconds"),
    ({"ResumeRate": -1}, "ResumeRate: -1 must be a whole number of nodes per minute"),
    ({"SlurmctldDebug": "info"}, "slurm_power_save.SlurmctldDebug: not a power saving key"),
    ({"SuspendExcNodes": ["cloud-dy-[1-"]}, "SuspendExcNodes: 'cloud-dy-[1-' is not a Slurm hostlist"),
    ({"SuspendExcParts": ["nope"]}, "SuspendExcParts: 'nope' is not in slurm_partitions (debug)"),
    ([1], "slurm_power_save: must be a mapping"),
])
def test_bad_power_save_settings(power_save, fragment):
    problems = elastic.elastic_problems([dockerset()], power_save, None, [], [{"PartitionName": "debug"}])
    assert any(fragment in p for p in problems), problems


def test_configless_is_the_default_only_with_elastic_nodes():
    assert elastic.configless(None, [dockerset()]) is True
    assert elastic.configless(None, []) is False
    assert elastic.configless(False, [dockerset()]) is False
    assert elastic.configless(True, []) is True
    assert elastic.elastic_problems([], {}, "maybe", []) != []
    # Elastic nodes have no slurm.conf of their own: file-based mode cannot start them.
    assert any(p.startswith("slurm_configless: false, but the cluster has elastic node sets")
               for p in elastic.elastic_problems([dockerset()], {}, False, []))
    assert elastic.elastic_problems([], {}, False, []) == []


def test_plan_adds_power_saving_and_cloud_nodes():
    plan = slurm_elastic_plan([dockerset()], CONFIG, {"SuspendTime": 60, "ResumeRate": 2}, None,
                              ["cloud-c1", "cloud-c2"], ["cloud-ctl1"])
    config = plan["config"]
    assert plan["configless"] is True
    assert plan["conf_server"] == "cloud-ctl1:6817"
    assert plan["nodes"] == [{"NodeName": "cloud-dy-[1-4]", "State": "CLOUD", "CPUs": 1, "RealMemory": 1000,
                              "Features": ["dynamic"], "Weight": 10}]
    assert config["SlurmctldParameters"] == ["enable_configless", "cloud_reg_addrs"]
    assert config["SuspendTime"] == 60 and config["ResumeRate"] == 2 and config["ResumeTimeout"] == 300
    # Slurm powers down any node idle for SuspendTime: the always-on ones are excluded by name.
    assert config["SuspendExcNodes"] == "cloud-c[1-2]"
    assert config["ResumeProgram"] == "/usr/local/sbin/hybridhpc-power-resume"
    assert config["TreeWidth"] == 65533
    text = render_settings(config)
    assert "SlurmctldParameters=enable_configless,cloud_reg_addrs" in text


def test_cloud_reg_addrs_only_where_the_controllers_major_still_has_it():
    # 24.11 and later log it as defunct at every start and reconfigure; 22.05 needs it.
    for major, params in (("22.05", ["enable_configless", "cloud_reg_addrs"]), ("", ["enable_configless", "cloud_reg_addrs"]),
                          ("24.11", ["enable_configless"]), ("26.05", ["enable_configless"])):
        plan = slurm_elastic_plan([dockerset()], CONFIG, None, None, ["cloud-c1"], ["cloud-ctl1"], major)
        assert plan["config"]["SlurmctldParameters"] == params, major


def test_the_users_keys_win_and_slurmctld_parameters_are_joined():
    config = dict(CONFIG, SlurmctldParameters="reboot_from_controller", SuspendTime=900, treewidth=50)
    plan = slurm_elastic_plan([dockerset()], config, {"SuspendTime": 60}, None, [], ["cloud-ctl1"])
    assert plan["config"]["SuspendTime"] == 900
    assert plan["config"]["treewidth"] == 50 and "TreeWidth" not in plan["config"]
    assert plan["config"]["SlurmctldParameters"] == [
        "reboot_from_controller", "enable_configless", "cloud_reg_addrs"]
    # No always-on nodes: nothing to exclude, no empty key.
    assert "SuspendExcNodes" not in plan["config"]


def test_without_elastic_nodes_the_config_is_untouched_unless_configless():
    assert slurm_elastic_plan([], CONFIG, {}, None, ["c1"], ["ctl"])["config"] == CONFIG
    plan = slurm_elastic_plan([], CONFIG, {}, True, ["c1"], ["ctl1", "ctl2"])
    assert plan["config"]["SlurmctldParameters"] == ["enable_configless"]
    assert "SuspendTime" not in plan["config"]
    assert plan["conf_server"] == "ctl1:6817,ctl2:6817"


def test_conf_server_takes_the_first_port_of_a_range():
    assert elastic.conf_server(["a", "b"], {"slurmctldport": "7817-7818"}) == "a:7817,b:7817"


def test_tool_config_carries_what_new_nodes_need_and_no_secret():
    config = slurm_power_tool_config([dockerset(nodes="cloud-dy-[3,1,2]")], "cloud", "cloud-ctl1:6817", 64029, 64029,
                                     {"queue_dir": "/var/spool/hybridhpc-power"})
    nodeset = config["nodesets"][0]
    assert config["cluster"] == "cloud" and config["queue_dir"] == "/var/spool/hybridhpc-power"
    assert nodeset["nodes"] == "cloud-dy-[3,1-2]"
    assert nodeset["options"]["conf_server"] == "cloud-ctl1:6817"
    assert nodeset["options"]["munge_uid"] == 64029
    over = slurm_power_tool_config([dockerset(options={"image": "i", "network": "n", "conf_server": "10.0.0.2"})],
                                   "cloud", "cloud-ctl1:6817", 1, 1)
    assert over["nodesets"][0]["options"]["conf_server"] == "10.0.0.2"


def test_site_inputs_check_elastic_sets_against_the_clusters_static_nodes():
    inputs = {"slurm_elastic_nodesets": [dockerset(nodes="n[1-2]")], "compute_hosts": ["c1"],
              "slurm_nodes": [{"NodeName": "n[2-3]", "CPUs": 1}]}
    problems = input_problems(inputs, ["elastic"])
    assert any("n2 is also an always-on node" in p for p in problems), problems
    assert input_problems({"power_save_reconcile_interval": 0, "power_save_log_file": "log"}, ["power_save"]) == [
        "power_save_reconcile_interval: 0 must be seconds from 1",
        "power_save_log_file: 'log' must be an absolute path (starting with /)",
    ]


def test_configless_compute_nodes_follow_their_controllers_restart():
    states = {"ctl1": {"restart_required": False}, "ctl2": {"restart_required": True}}
    assert controllers_restart(["ctl1", "ctl2"], states) is True
    assert controllers_restart(["ctl1"], states) is False
    # A controller this run did not reach does not count.
    assert controllers_restart(["ctl3"], states) is False


def test_the_programs_slurm_conf_names_are_the_ones_the_role_installs():
    import pathlib

    import yaml

    role_vars = pathlib.Path(__file__).resolve().parents[4] / "roles" / "power_save" / "vars" / "main.yml"
    installed = yaml.safe_load(role_vars.read_text())["__power_save_programs"]
    assert sorted(installed.values()) == sorted(elastic.PROGRAMS.values())
    assert installed["resume"] == elastic.PROGRAMS["ResumeProgram"]
    assert installed["suspend"] == elastic.PROGRAMS["SuspendProgram"]
    assert installed["resume-fail"] == elastic.PROGRAMS["ResumeFailProgram"]


def test_file_entries_keep_the_tree_below_the_source_root():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.hybridhpc.slurm.plugins.filter.elastic import slurm_file_entries

    entries = slurm_file_entries(["/src/pkg/a.py", "/src/pkg/providers/b.py"], ["A", "B"], "/src/pkg", "/opt/x/pkg")
    assert entries == [{"dest": "/opt/x/pkg/a.py", "content": "A", "mode": "0644"},
                       {"dest": "/opt/x/pkg/providers/b.py", "content": "B", "mode": "0644"}]
    with pytest.raises(AnsibleFilterError):
        slurm_file_entries(["/elsewhere/a.py"], ["A"], "/src/pkg", "/opt")
    with pytest.raises(AnsibleFilterError):
        slurm_file_entries(["/src/pkg/a.py"], [], "/src/pkg", "/opt")


def test_a_cluster_of_elastic_nodes_only_renders_its_nodes_partition_and_power_saving():
    # The reference walkthrough's burst cluster: no always-on node to exclude from power saving.
    sets = [{"name": "dy", "nodes": "compute-dy-t2micro-[1-10]", "node": {"CPUs": 1, "RealMemory": 900},
             "provider": "aws", "options": {"region": "eu-west-1", "launch_template": "lt", "munge_key_parameter": "/k"}}]
    plan = slurm_elastic_plan(sets, {"ClusterName": "aws", "SlurmctldHost": ["aws-ctl1"]}, None, None, [], ["aws-ctl1"], "24.11")
    text = slurm_conf_render(plan["config"], nodes=plan["nodes"],
                             partitions=[{"PartitionName": "compute", "Nodes": "compute-dy-t2micro-[1-10]", "Default": True}])
    lines = text.splitlines()
    node_lines = [line for line in lines if line.startswith("NodeName=")]
    assert node_lines and all("State=CLOUD" in line for line in node_lines), node_lines
    assert any("compute-dy-t2micro-[1-10]" in line for line in node_lines), node_lines
    assert "PartitionName=compute Nodes=compute-dy-t2micro-[1-10] Default=YES" in text
    assert not any(line.startswith("SuspendExcNodes=") for line in lines), "nothing to exclude, no empty key"
    assert any(line.startswith("ResumeProgram=") for line in lines) and plan["configless"]
    # 24.11 calls cloud_reg_addrs defunct: not in its slurm.conf.
    assert "cloud_reg_addrs" not in text
