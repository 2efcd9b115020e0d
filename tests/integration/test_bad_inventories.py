"""Wrong inventories fail before any change, with a message naming the variable.

Each case writes an inventory whose hosts are docker containers that do not
exist: if validation let a case through, the next play would fail to connect
and the expected message would be missing, so the test fails.
"""

import base64
import os
import pathlib
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "site.yml"
ANSIBLE_PLAYBOOK = pathlib.Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "ansible-playbook"

GOOD_VARS = {"slurm_cluster_name": "bad", "slurm_nodes": [{"NodeName": "bad-c[1-2]", "CPUs": 2, "RealMemory": 1000}]}


def inventory(ctl=("bad-ctl1",), dbd=("bad-ctl1",), compute=("bad-c1", "bad-c2"), **overrides):
    variables = dict(GOOD_VARS, ansible_connection="community.docker.docker")
    variables.update(overrides)
    return {
        "all": {
            "vars": variables,
            "children": {
                "slurmctld": {"hosts": dict.fromkeys(ctl)},
                "slurmdbd": {"hosts": dict.fromkeys(dbd)},
                "slurmd": {"hosts": dict.fromkeys(compute)},
            },
        }
    }


CASES = {
    "missing controller": (inventory(ctl=()), "groups['slurmctld']"),
    "node without CPUs": (inventory(slurm_nodes=[{"NodeName": "bad-c[1-2]"}]), "slurm_nodes[0]"),
    "unknown value type in slurm_config": (inventory(slurm_config={"SchedulerParameters": {"bf": 1}}), "slurm_config.SchedulerParameters"),
    "bad hostlist in a partition": (
        inventory(slurm_partitions=[{"PartitionName": "p", "Nodes": "bad-c[1-"}]),
        "slurm_partitions[0].Nodes",
    ),
    "munge key of the wrong size": (inventory(munge_key_b64=base64.b64encode(b"x" * 16).decode()), "munge_key_b64"),
    "munge key not base64": (inventory(munge_key_b64="not base64 !"), "munge_key_b64"),
    "cluster name Slurm rejects": (inventory(slurm_cluster_name="My-Cluster"), "slurm_cluster_name"),
    "missing cluster name": (inventory(slurm_cluster_name=None), "slurm_cluster_name"),
    "two default partitions": (
        inventory(slurm_partitions=[
            {"PartitionName": "a", "Nodes": "ALL", "Default": True},
            {"PartitionName": "b", "Nodes": "ALL", "Default": True},
        ]),
        "slurm_partitions",
    ),
    "partition over an undefined node": (
        inventory(slurm_partitions=[{"PartitionName": "p", "Nodes": "bad-c[1-3]"}]),
        "slurm_partitions[0]",
    ),
    "database password slurmdbd.conf cannot hold": (inventory(slurmdbd_storage_pass="abc#def"), "slurmdbd_storage_pass"),
    "munge and slurm share a uid": (inventory(slurm_uid=5000, munge_uid=5000), "munge_uid"),
    "accounting without a slurmdbd host": (inventory(dbd=()), "groups['slurmdbd']"),
    "slurm_config is not a mapping": (inventory(slurm_config=["ClusterName=x"]), "slurm_config"),
    "duplicate node": (
        inventory(slurm_nodes=[{"NodeName": "bad-c1", "CPUs": 1}, {"NodeName": "bad-c[1-2]", "CPUs": 1}]),
        "slurm_nodes[1]",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_inventory_fails_before_any_change(case, tmp_path):
    inv, expected = CASES[case]
    if inv["all"]["vars"].get("slurm_cluster_name") is None:
        del inv["all"]["vars"]["slurm_cluster_name"]
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inv))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CACHE_PLUGIN="memory", ANSIBLE_LOG_PATH="/dev/null")
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(path), str(PLAYBOOK)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert expected in out, out
    # Validation stopped the run: the MUNGE play never started.
    assert "PLAY [MUNGE" not in out, out
