"""slurm_common's job_submit.lua, rendered with Ansible's templating and run in a real Lua (lupa).

slurmctld calls ``slurm_job_submit(job_desc, part_list, submit_uid)`` with the
job's request; the script must make every job of a Kubernetes-shared partition
consume k8scpu/k8smemory from its CPUs and memory, also when the job names no
partition and lands in the default one.
"""

import pathlib

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from templating import trusted

lupa = pytest.importorskip("lupa")

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "roles" / "slurm_common" / "templates" / "job_submit.lua.j2"
# slurmctld pushes its 64-bit NO_VAL as a Lua number (a double), as lupa does with a float.
NO_VAL, NO_VAL16, NO_VAL64 = 0xFFFFFFFE, 0xFFFE, float(0xFFFFFFFFFFFFFFFE)


def render(partitions, k8s_partitions, config=None):
    variables = {
        "ansible_managed": "Ansible managed",
        "__slurm_common_config": config or {"DefMemPerCPU": 512},
        "slurm_partitions": partitions,
        "slurm_k8s_partitions": k8s_partitions,
    }
    loader = DataLoader()
    return Templar(loader=loader, variables=trusted(variables)).template(trusted(TEMPLATE.read_text()))


def load(script):
    runtime = lupa.LuaRuntime(unpack_returned_tuples=True)
    messages = []
    slurm = runtime.table_from(
        {
            "SUCCESS": 0,
            "ERROR": -1,
            "NO_VAL": NO_VAL,
            "NO_VAL16": NO_VAL16,
            "NO_VAL64": NO_VAL64,
            "INFINITE": 0xFFFFFFFF,
            "INFINITE16": 0xFFFF,
            "log_user": messages.append,
        }
    )
    runtime.globals().slurm = slurm
    runtime.execute(script)
    return runtime, messages


def submit(runtime, **desc):
    fields = {
        "cpus_per_task": NO_VAL16,
        "ntasks_per_node": NO_VAL16,
        "min_nodes": NO_VAL,
        "num_tasks": NO_VAL,
        "min_cpus": NO_VAL,
        "min_mem_per_node": NO_VAL64,
        "min_mem_per_cpu": NO_VAL64,
    }
    fields.update(desc)
    job = runtime.table_from(fields)
    rc = runtime.globals().slurm_job_submit(job, runtime.table_from({}), 1000)
    return rc, job["tres_per_node"]


TWO = [{"PartitionName": "shared", "Nodes": "c1", "Default": True}, {"PartitionName": "plain", "Nodes": "c2"}]


def test_a_job_consumes_the_gres_from_its_cpus_and_memory():
    runtime = load(render([{"PartitionName": "main", "Nodes": "ALL", "Default": True}], []))[0]
    assert submit(runtime, cpus_per_task=3, min_mem_per_node=1000) == (0, "gres/k8scpu:3,gres/k8smemory:1000")
    assert submit(runtime, num_tasks=2, min_mem_per_cpu=100) == (0, "gres/k8scpu:2,gres/k8smemory:200")
    assert submit(runtime, tres_per_node="gres/gpu:1") == (0, "gres/gpu:1,gres/k8scpu:1,gres/k8smemory:512")


def test_a_job_without_a_partition_is_judged_by_the_default_partition():
    runtime = load(render(TWO, ["shared"]))[0]
    assert submit(runtime, cpus_per_task=3, min_mem_per_node=1000)[1] == "gres/k8scpu:3,gres/k8smemory:1000"
    assert submit(runtime, partition="shared", min_mem_per_node=10)[1] == "gres/k8scpu:1,gres/k8smemory:10"
    assert submit(runtime, partition="plain", min_mem_per_node=10) == (0, None)


def test_a_job_whose_memory_is_unknown_is_refused_with_the_reason():
    runtime, messages = load(render(TWO, ["shared"], config={}))
    assert submit(runtime, partition="shared", min_mem_per_node=0)[0] == -1
    assert "give the job's memory" in messages[-1]
