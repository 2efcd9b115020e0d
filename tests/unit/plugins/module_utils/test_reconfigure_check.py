# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""reconfigure_check: slurmctld's log and node records say whether it took a new configuration."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

from ansible_collections.hybridhpc.slurm.plugins.module_utils import reconfigure_check as rc

# What slurmctld 24.11 logged in the lab for a slurm.conf with the partition debug twice.
REJECTED_LOG = """[2026-11-30T10:01:02.100] Processing Reconfiguration Request
[2026-11-30T10:01:02.300] fatal: _build_single_partitionline_info: duplicate entry for partition debug
[2026-11-30T10:01:02.400] Resuming operation, reconfigure failed.
"""
ACCEPTED_LOG = """[2026-12-02T07:08:58.804] select/cons_tres: select_p_reconfigure: select/cons_tres: reconfigure
[2026-12-02T07:08:58.805] Running as primary controller
[2026-12-02T07:08:58.810] error: No fed_mgr state file (/var/lib/slurm/slurmctld/fed_mgr_state) to recover
[2026-12-02T07:08:59.000] The SlurmctldParameters option "cloud_reg_addrs" is defunct, please remove it from slurm.conf
"""


def test_a_rejected_reconfigure_is_read_from_the_log():
    rejected, warned = rc.log_verdict(REJECTED_LOG)
    assert len(rejected) == 2 and "duplicate entry for partition debug" in rejected[0]
    assert "reconfigure failed" in rejected[1] and warned == []


def test_an_accepted_reconfigure_has_no_rejected_line_and_defunct_options_are_warnings():
    rejected, warned = rc.log_verdict(ACCEPTED_LOG)
    assert rejected == []
    assert len(warned) == 1 and "cloud_reg_addrs" in warned[0]


def test_a_node_running_another_configuration_is_named():
    out = (
        "NodeName=c1 Arch=x86_64 Gres=gpu:1 State=IDLE+DRAIN+INVALID_REG ThreadsPerCore=1 "
        "Reason=gres/gpu count reported lower than configured (0 < 1) [slurm@2026-12-02T08:00:00]\n"
        "NodeName=c2 Arch=x86_64 Gres=(null) State=IDLE ThreadsPerCore=1\n"
        "NodeName=cloud-dy-1 State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=1\n"
    )
    nodes = rc.parse_nodes(out)
    assert nodes["c1"]["Reason"].startswith("gres/gpu count reported lower")
    assert nodes["c2"]["State"] == "IDLE"
    problems = rc.node_problems(nodes)
    assert problems == ["node c1: State=IDLE+DRAIN+INVALID_REG Reason=gres/gpu count reported lower than configured "
                        "(0 < 1) [slurm@2026-12-02T08:00:00]"]


def test_a_drain_for_another_reason_is_no_configuration_problem():
    nodes = rc.parse_nodes("NodeName=c1 State=IDLE+DRAIN Reason=maintenance [root@2026-12-01T10:00:00]\n")
    assert rc.node_problems(nodes) == []


def test_ping_answer():
    assert rc.answered("Slurmctld(primary) at onprem-ctl1 is UP\n")
    assert not rc.answered("Slurmctld(primary) at onprem-ctl1 is DOWN\n")


def test_changed_lines_are_those_the_accepted_file_lacks():
    accepted = "ClusterName=a\nPartitionName=debug Nodes=ALL\n"
    rejected = accepted + "PartitionName=debug Nodes=ALL MaxTime=1\n"
    assert rc.changed_lines(accepted, rejected) == ["PartitionName=debug Nodes=ALL MaxTime=1"]


def test_controller_up_reads_this_hosts_line():
    ping = "Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is UP\n"
    assert rc.controller_up(ping, "ctl1") is False
    assert rc.controller_up(ping, "ctl2") is True
    assert rc.controller_up(ping, "ctl3") is None
    assert rc.controller_up("", "ctl1") is None


def test_a_lost_reply_is_no_refusal_but_a_failed_command_is():
    # What scontrol printed in CI when both controllers of a loaded host took longer than MessageTimeout.
    lost = "slurm_reconfigure error: Socket timed out on send/recv operation"
    assert rc.command_rejected("reconfigure", 1, lost) == []
    assert rc.command_rejected("reconfigure", 0, "") == []
    assert rc.command_rejected("reconfigure", 1, "slurm_reconfigure error: Unspecified error") == [
        "reconfigure: slurm_reconfigure error: Unspecified error"]
    # A restart that failed failed, whatever it printed.
    assert rc.command_rejected("restart", 1, "Job for slurmctld.service failed. Connection refused") == [
        "restart: Job for slurmctld.service failed. Connection refused"]
