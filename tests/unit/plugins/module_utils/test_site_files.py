# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""site_files: Slurm's other files as data, which file on which major and host, and the first play's checks."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest
import yaml

from ansible_collections.hybridhpc.slurm.plugins.filter import site_files as site_filters
from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files, site_files

TREE = {"type": "tree", "switches": [
    {"name": "leaf1", "nodes": "c[1-2]"}, {"name": "leaf2", "nodes": ["c3", "c4"]}, {"name": "spine", "switches": "leaf[1-2]"}]}
BLOCK = {"type": "block", "blocks": [{"name": "b1", "nodes": "c[1-2]"}, {"name": "b2", "nodes": "c[3-4]"}], "block_sizes": [2, 4]}
NODES = ["c1", "c2", "c3", "c4"]
PROLOG = {"name": "10-scratch.sh", "type": "Prolog", "content": "#!/bin/sh\nmkdir -p /scratch/$SLURM_JOB_USER\n"}
TASK = {"name": "env.sh", "type": "TaskProlog", "content": "#!/bin/sh\necho export X=1\n"}
CTLD = {"name": "audit.sh", "type": "PrologSlurmctld", "content": "#!/bin/sh\nlogger job $SLURM_JOB_ID\n"}


# Read from Slurm's src/common/fetch_config.c at slurm-22-05-8-1, -24-11-0-1 and -26-05-0-1.
@pytest.mark.parametrize("major, served, not_served", [
    ("22.05", {"ext_sensors.conf", "knl_cray.conf", "topology.conf", "job_container.conf"},
     {"scrun.lua", "namespace.yaml", "topology.yaml"}),
    ("24.11", {"scrun.lua", "topology.conf", "job_container.conf", "plugstack.conf"},
     {"ext_sensors.conf", "namespace.yaml", "topology.yaml"}),
    ("25.05", {"scrun.lua"}, {"topology.yaml", "namespace.yaml"}),
    ("26.05", {"namespace.yaml", "topology.yaml", "scrun.lua", "oci.conf"}, {"ext_sensors.conf"}),
])
def test_configless_serves_the_files_of_its_major(major, served, not_served):
    files = site_files.configless_served(major, "slurmd")
    assert served <= files and not (not_served & files)


def test_configless_clients_get_fewer_files():
    assert site_files.configless_served("22.05", "client") == {"slurm.conf", "cli_filter.lua", "plugstack.conf", "topology.conf"}
    assert "oci.conf" in site_files.configless_served("24.11", "client")
    assert "topology.yaml" in site_files.configless_served("26.05", "client")


@pytest.mark.parametrize("major, configless, name", [
    ("22.05", False, "topology.conf"), ("24.11", True, "topology.conf"), ("25.05", False, "topology.yaml"),
    ("25.05", True, "topology.conf"), ("26.05", True, "topology.yaml"), ("", False, "topology.conf"),
])
def test_the_topology_file_is_one_the_nodes_get(major, configless, name):
    assert site_files.topology_file(major, configless) == name


def test_topology_conf_lines_and_the_header_first():
    text = site_files.render_topology(TREE, "topology.conf")
    lines = text.splitlines()
    assert config_files.MANAGED_HEADER.decode() in lines[0]
    assert lines[1:] == ["SwitchName=leaf1 Nodes=c[1-2]", "SwitchName=leaf2 Nodes=c3,c4", "SwitchName=spine Switches=leaf[1-2]"]
    assert site_files.render_topology(BLOCK, "topology.conf").splitlines()[1:] == [
        "BlockName=b1 Nodes=c[1-2]", "BlockName=b2 Nodes=c[3-4]", "BlockSizes=2,4"]


def test_topology_yaml_has_the_shape_of_slurms_man_page():
    tree = yaml.safe_load(site_files.render_topology(TREE, "topology.yaml"))
    assert tree == [{"topology": "default", "cluster_default": True, "tree": {"switches": [
        {"switch": "leaf1", "nodes": "c[1-2]"}, {"switch": "leaf2", "nodes": "c3,c4"},
        {"switch": "spine", "children": "leaf[1-2]"}]}}]
    block = yaml.safe_load(site_files.render_topology(BLOCK, "topology.yaml"))
    assert block[0]["block"] == {"block_sizes": [2, 4], "blocks": [{"block": "b1", "nodes": "c[1-2]"}, {"block": "b2", "nodes": "c[3-4]"}]}


def test_the_per_job_tmp_plugin_follows_the_major():
    name, text = site_files.render_job_tmp({"base_path": "/local/job", "shared": True}, "24.11")
    assert name == "job_container.conf"
    assert text.splitlines()[1:] == ["AutoBasePath=true", "BasePath=/local/job", "Dirs=/tmp,/dev/shm", "Shared=true"]
    name, text = site_files.render_job_tmp({"dirs": ["/tmp"]}, "26.05")
    assert name == "namespace.yaml"
    assert yaml.safe_load(text) == {"defaults": {"auto_base_path": True, "base_path": "/var/lib/slurm/job_tmp", "dirs": "/tmp"}}


def test_settings_add_the_plugins_contain_and_the_script_paths():
    merged = site_files.settings({"PrologFlags": "X11"}, TREE, {"enabled": True}, [PROLOG, TASK, CTLD], "24.11", False, "/etc/slurm/")
    assert merged == {"PrologFlags": "X11,Contain", "TopologyPlugin": "topology/tree", "JobContainerType": "job_container/tmpfs",
                      "Prolog": "/etc/slurm/scripts/prolog-*", "TaskProlog": "/etc/slurm/scripts/taskprolog-env.sh",
                      "PrologSlurmctld": "/etc/slurm/scripts/prologslurmctld-audit.sh"}
    newer = site_files.settings({}, TREE, {"enabled": True}, [], "26.05", False, "/etc/slurm")
    # topology.yaml replaces TopologyPlugin; 25.11 removed JobContainerType.
    assert newer == {"NamespaceType": "namespace/linux", "PrologFlags": "Contain"}
    assert site_files.settings({}, {}, {"enabled": False}, [], "24.11", False, "/etc/slurm") == {}


def test_the_inventorys_own_keys_win():
    merged = site_files.settings({"JobContainerType": "job_container/none"}, {}, {"enabled": True}, [], "24.11", False, "/etc/slurm")
    assert merged["JobContainerType"] == "job_container/none"


def _names(entries):
    return sorted(e["name"] for e in entries)


@pytest.fixture
def everything():
    extra = [{"name": "plugstack.conf", "content": "required x.so\n"}, {"name": "burst_buffer.conf", "content": "Flags=x\n"}]
    return lambda major, configless: site_files.files(TREE, {"enabled": True}, [PROLOG, TASK, CTLD], extra, major, configless,
                                                      "/etc/slurm")


def test_a_file_based_cluster_gives_each_host_what_it_reads(everything):
    files = everything("24.11", False)
    assert _names(site_files.host_files(files, "24.11", False, {"slurmctld"}, True)) == [
        "burst_buffer.conf", "plugstack.conf", "scripts/prologslurmctld-audit.sh", "topology.conf"]
    assert _names(site_files.host_files(files, "24.11", False, {"slurmd"}, True)) == [
        "job_container.conf", "plugstack.conf", "scripts/prolog-10-scratch.sh", "scripts/taskprolog-env.sh", "topology.conf"]
    assert _names(site_files.host_files(files, "24.11", False, set(), True)) == ["plugstack.conf", "topology.conf"]


def test_a_configless_controller_writes_what_it_serves_and_its_nodes_only_their_scripts(everything):
    files = everything("24.11", True)
    assert _names(site_files.host_files(files, "24.11", True, {"slurmctld"}, True)) == [
        "burst_buffer.conf", "job_container.conf", "plugstack.conf", "scripts/prologslurmctld-audit.sh", "topology.conf"]
    assert _names(site_files.host_files(files, "24.11", True, {"slurmd"}, False)) == [
        "scripts/prolog-10-scratch.sh", "scripts/taskprolog-env.sh"]
    assert _names(site_files.host_files(files, "24.11", True, {"sackd"}, False)) == []


def test_site_files_get_the_header_in_their_own_comment_syntax():
    entries = site_files.files({}, {}, [], [{"name": "cli_filter.lua", "content": "return slurm.SUCCESS\n"},
                                            {"name": "helpers.conf", "content": "NodeName=c1 Feature=a\n"}], "24.11", False, "/etc/slurm")
    lua, helpers = entries
    assert lua["content"].startswith("-- Managed by Ansible (hybridhpc.slurm)") and lua["content"].endswith("return slurm.SUCCESS\n")
    assert helpers["content"].startswith("# Managed by Ansible (hybridhpc.slurm)") and helpers["mode"] == "0644"


def test_the_filter_names_dests_retired_files_and_the_scripts_directory():
    result = site_filters.slurm_site_host_files(["slurmd"], TREE, {}, [PROLOG], [], "24.11", False, "/etc/slurm", True)
    assert [f["dest"] for f in result["files"]] == ["/etc/slurm/topology.conf", "/etc/slurm/scripts/prolog-10-scratch.sh"]
    assert result["files"][1]["mode"] == "0755" and result["scripts_dir"] == "/etc/slurm/scripts"
    assert "/etc/slurm/topology.yaml" in result["retired"] and "/etc/slurm/topology.conf" not in result["retired"]
    assert not any(r.endswith(("/slurm.conf", "/gres.conf", "/cgroup.conf")) for r in result["retired"])


def problems(**inputs):
    return site_files.problems(dict({"node_names": NODES, "major": "24.11"}, **inputs))


def test_good_inputs_pass():
    assert problems(topology=TREE, job_tmp={"enabled": True}, scripts=[PROLOG, TASK, CTLD],
                    site_files=[{"name": "plugstack.conf", "content": "required x.so\n"}]) == []
    assert problems(topology=BLOCK) == []


@pytest.mark.parametrize("inputs, expected", [
    ({"topology": {"type": "tree", "switches": [{"name": "s1", "nodes": "c[1-3]"}]}}, "slurm_topology: nodes c4 are under no switch"),
    ({"topology": {"type": "tree", "switches": [{"name": "s1", "nodes": "c[1-5]"}]}}, "s1): c5 not nodes of this cluster"),
    ({"topology": {"type": "tree", "switches": [{"name": "s1", "nodes": NODES}, {"name": "s2", "switches": "s9"}]}},
     "(s2): switches s9 are not defined"),
    ({"topology": {"type": "tree", "switches": [{"name": "s1", "nodes": NODES}, {"name": "a", "switches": "b"},
                                                {"name": "b", "switches": "a"}]}}, "(a): a switch below itself"),
    ({"topology": {"type": "tree", "switches": [{"name": "s1", "nodes": NODES}, {"name": "s1", "nodes": "c1"}]}},
     "slurm_topology.switches[1]: s1 is named twice"),
    ({"topology": {"type": "tree", "switches": [{"name": "s1", "nodes": NODES, "switches": "x"}]}}, "not both"),
    ({"topology": {"type": "torus"}}, "slurm_topology.type: 'torus': tree or block"),
    ({"topology": dict(BLOCK, block_sizes=[2, 6])}, "each size a power of two times the one before"),
    ({"topology": {"type": "block", "blocks": [{"name": "b1", "nodes": "c[1-3]"}, {"name": "b2", "nodes": "c[3-4]"}]}},
     "node c3 is also in block b1"),
    ({"topology": TREE, "config": {"topologyplugin": "topology/tree"}}, "slurm_config.TopologyPlugin"),
    ({"job_tmp": {"base_path": "/tmp/jobs"}}, "slurm_job_tmp.base_path: /tmp/jobs is inside /tmp, /dev/shm"),
    ({"job_tmp": {"base_path": "relative"}}, "slurm_job_tmp.base_path: 'relative': an absolute path"),
    ({"job_tmp": {"dirs": "/tmp"}}, "slurm_job_tmp.dirs: '/tmp': a list of absolute paths"),
    ({"job_tmp": {"size": 1}}, "slurm_job_tmp: unknown keys size"),
    ({"job_tmp": {"enabled": True}, "config": {"JobContainerType": "job_container/tmpfs"}}, "slurm_config.JobContainerType"),
    ({"scripts": [dict(PROLOG, type="Preamble")]}, "slurm_scripts[0].type: 'Preamble': one of"),
    ({"scripts": [dict(PROLOG, content="mkdir /x\n")]}, "starts without '#!'"),
    ({"scripts": [dict(PROLOG, name="../x")]}, "slurm_scripts[0].name: '../x'"),
    ({"scripts": [TASK, dict(TASK, name="other.sh")]}, "TaskProlog takes one program, got env.sh, other.sh"),
    ({"scripts": [PROLOG, PROLOG]}, "two Prolog scripts named 10-scratch.sh"),
    ({"scripts": [dict(PROLOG, mode="755x")]}, "slurm_scripts[0].mode: '755x'"),
    ({"scripts": [PROLOG], "config": {"Prolog": "/x"}}, "slurm_config.Prolog: set by slurm_scripts"),
    ({"site_files": [{"name": "gres.conf", "content": "x"}]}, "gres.conf is written from slurm_gres"),
    ({"site_files": [{"name": "frobnicate.conf", "content": "x"}]}, "frobnicate.conf is not a file Slurm reads"),
    ({"site_files": [{"name": "mpi.conf", "content": ""}]}, "slurm_site_files[0].content: the file's text"),
    ({"site_files": [{"name": "mpi.conf", "content": "x", "path": "/x"}]}, "unknown keys path"),
    ({"site_files": [{"name": "mpi.conf", "content": "x"}, {"name": "mpi.conf", "content": "y"}]}, "mpi.conf is listed twice"),
    ({"site_files": [{"name": "scrun.lua", "content": "x"}], "configless": True, "major": "22.05"},
     "scrun.lua: a configless cluster's slurmctld on Slurm 22.05 does not send it to the nodes"),
    ({"site_files": [{"name": "acct_gather.conf", "content": "ProfileInfluxDBPass=x\n", "secret": True}]},
     "slurm_site_files[0].mode: 0644 lets every user read a secret file; give '0600'"),
    ({"site_files": [{"name": "acct_gather.conf", "content": "x", "secret": True, "mode": "0604"}]}, "0604 lets every user"),
    ({"site_files": [{"name": "acct_gather.conf", "content": "x", "secret": "maybe", "mode": "0600"}]},
     "slurm_site_files[0].secret: 'maybe': true or false"),
])
def test_bad_inputs_are_named_with_the_fix(inputs, expected):
    found = problems(**inputs)
    assert any(expected in message for message in found), found


SECRET = {"name": "acct_gather.conf", "content": "ProfileInfluxDBPass=hunter2\n", "secret": True, "mode": "0600"}


def test_a_secret_file_passes_with_an_owner_only_mode_and_goes_out_as_secret_content():
    assert problems(site_files=[SECRET]) == [] and problems(site_files=[dict(SECRET, mode="0640")]) == []
    result = site_filters.slurm_site_host_files(["slurmd"], {}, {}, [], [SECRET, {"name": "mpi.conf", "content": "x\n"}],
                                                "24.11", False, "/etc/slurm", True)
    secret, plain = result["files"]
    # slurm_config_files never logs or diffs secret_content.
    assert "content" not in secret and secret["secret_content"].endswith("ProfileInfluxDBPass=hunter2\n")
    assert secret["mode"] == "0600" and "secret_content" not in plain and plain["content"].endswith("x\n")
    # Off by default, and a templated "False" is off.
    result = site_filters.slurm_site_host_files(["slurmd"], {}, {}, [], [dict(SECRET, secret="False")], "24.11", False,
                                                "/etc/slurm", True)
    assert "content" in result["files"][0]


def test_a_file_served_on_that_major_passes_on_a_configless_cluster():
    assert problems(site_files=[{"name": "scrun.lua", "content": "x"}], configless=True, major="24.11") == []


def test_the_filter_reads_the_node_names_from_the_records():
    found = site_filters.slurm_site_files_problems({"topology": {"type": "tree", "switches": [{"name": "s1", "nodes": "c[1-2]"}]},
                                                    "nodes": [{"NodeName": "DEFAULT", "CPUs": 2}, {"NodeName": "c[1-3]"}]})
    assert found == ["slurm_topology: nodes c3 are under no switch; Slurm cannot place multi-node jobs on them "
                     "(every node must be in the topology)"]


def test_a_templated_switch_off_is_off():
    # "{{ ... | bool }}" in an inventory mapping is the text "False" on ansible-core 2.18.
    assert site_files.settings({}, {}, {"enabled": "False"}, [], "24.11", False, "/etc/slurm") == {}
    assert site_files.files({}, {"enabled": "False"}, [], [], "24.11", False, "/etc/slurm") == []
    assert "Shared=true" not in site_files.render_job_tmp({"shared": "false"}, "24.11")[1]


def test_slurm_22_05_gets_no_dirs_and_refuses_them():
    # Dirs and Shared came with 23.02 (job_container.conf(5) of slurm-22-05-8-1 and slurm-23-02-1-1).
    name, text = site_files.render_job_tmp({"shared": True}, "22.05")
    assert name == "job_container.conf" and text.splitlines()[1:] == ["AutoBasePath=true", "BasePath=/var/lib/slurm/job_tmp"]
    assert problems(job_tmp={"enabled": True}, major="22.05") == []
    assert any("takes no dirs or shared" in m for m in problems(job_tmp={"dirs": ["/tmp"]}, major="22.05"))
    assert any("takes no dirs or shared" in m for m in problems(job_tmp={"shared": True}, major="22.05"))
