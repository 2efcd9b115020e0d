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


def reconfigure_tasks():
    """The tasks that run slurm_reconfigure: the apply and, in its rescue, the rollback's."""
    found = []

    def walk(tasks):
        for task in tasks or []:
            if "hybridhpc.slurm.slurm_reconfigure" in task:
                found.append(task)
            walk(task.get("block"))
            walk(task.get("rescue"))

    walk(yaml.safe_load(TASKS.read_text()))
    assert len(found) == 2, found
    return found


def test_one_cluster_at_a_time():
    assert all(task.get("throttle") == 1 for task in reconfigure_tasks())


def test_each_waits_until_its_controller_answers():
    # The module returns only once scontrol ping answers (or fails): its timeout is not turned off.
    for task in reconfigure_tasks():
        assert task["hybridhpc.slurm.slurm_reconfigure"].get("timeout", 60) > 0
