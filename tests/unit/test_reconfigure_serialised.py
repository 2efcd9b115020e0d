"""Federated clusters are reconfigured one at a time.

Two slurmctld of one federation that re-execute for ``scontrol reconfigure``
at the same moment deadlock while registering with their shared slurmdbd
(Slurm 24.11.5: reproduced in the lab by reconfiguring onprem and cloud in
parallel, 3 times out of 3; neither answers again until killed). A play over
``slurmctld`` spans every cluster, so the role's reconfigure task must run on
one host at a time and return only once its controller answers again. The
race is too narrow to trigger reliably through Ansible's forks, so this pins
the task's shape; the federation scenario (verify_reconfigure.yml) applies one change to both
clusters on the real daemons.
"""

import pathlib

import yaml

TASKS = pathlib.Path(__file__).resolve().parents[2] / "roles" / "slurmctld" / "tasks" / "main.yml"


def reconfigure_task():
    tasks = yaml.safe_load(TASKS.read_text())
    found = [t for t in tasks if "scontrol reconfigure" in str(t.get("ansible.builtin.shell") or t.get("ansible.builtin.command") or "")]
    assert len(found) == 1, found
    return found[0]


def test_one_cluster_at_a_time():
    assert reconfigure_task().get("throttle") == 1


def test_each_waits_until_its_controller_answers():
    script = reconfigure_task()["ansible.builtin.shell"]
    assert script.index("scontrol reconfigure") < script.index("scontrol show config")
    assert "exit 1" in script.split("scontrol show config", 1)[1]
