import base64

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_model import cluster_problems

GOOD = {
    "cluster_name": "lab",
    "controllers": ["ctl1"],
    "dbd_hosts": ["ctl1"],
    "compute_hosts": ["c1", "c2"],
    "accounting": True,
    "nodes": [],
    "partitions": [{"PartitionName": "p", "Nodes": "c[1-2]", "Default": True}],
    "config": {"SchedulerParameters": ["bf_continue"]},
    "munge_key_b64": base64.b64encode(b"k" * 1024).decode(),
    "dbd_storage_pass": "S3cretPassw0rdLongEnough",
    "slurm_uid": 64030,
    "munge_uid": 64029,
}


def test_good_model_has_no_problem():
    assert cluster_problems(GOOD) == []


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"cluster_name": "Lab"}, "slurm_cluster_name"),
        ({"cluster_name": "a" * 41}, "slurm_cluster_name"),
        ({"cluster_name": "my lab"}, "slurm_cluster_name"),
        ({"cluster_name": ""}, "slurm_cluster_name"),
        ({"controllers": []}, "groups['slurmctld']"),
        ({"dbd_hosts": []}, "groups['slurmdbd']"),
        ({"compute_hosts": [], "nodes": []}, "groups['slurmd']"),
        ({"compute_hosts": ["c[1-2]"]}, "expands to several names"),
        ({"nodes": [{"NodeName": "c9"}]}, "slurm_nodes[0]: node c9 has no CPUs"),
        ({"nodes": [{"NodeName": "c9", "CPUs": "two"}]}, "CPUs='two' must be a positive integer"),
        ({"nodes": [{"NodeName": "c[9-"}]}, "slurm_nodes[0].NodeName"),
        ({"partitions": [{"PartitionName": "p", "Nodes": "c[1-3]"}]}, "slurm_partitions[0]: Nodes lists c3"),
        ({"partitions": [{"PartitionName": "a", "Default": True}, {"PartitionName": "b", "Default": "YES"}]}, "only one partition"),
        ({"config": {"A B": 1}}, "not a Slurm option name"),
        ({"munge_key_b64": base64.b64encode(b"k" * 31).decode()}, "the key is 31 bytes"),
        ({"munge_key_b64": base64.b64encode(b"k" * 1025).decode()}, "the key is 1025 bytes"),
        ({"munge_key_b64": "%%%"}, "munge_key_b64: not valid base64"),
        ({"dbd_storage_pass": "has space"}, "slurmdbd_storage_pass"),
        ({"slurm_uid": "abc"}, "slurm_uid"),
        ({"munge_uid": 64030}, "munge_uid: equals slurm_uid"),
    ],
)
def test_each_problem_names_the_variable(change, fragment):
    problems = cluster_problems(dict(GOOD, **change))
    assert any(fragment in p for p in problems), problems


def test_accounting_off_needs_no_dbd():
    assert cluster_problems(dict(GOOD, dbd_hosts=[], accounting=False)) == []


def test_all_problems_reported_together():
    problems = cluster_problems(dict(GOOD, cluster_name="Bad", controllers=[], munge_key_b64="x"))
    assert len(problems) == 3


# The reference walkthrough's burst cluster: ten elastic nodes, no always-on one.
BURST_SETS = [{"name": "dy", "nodes": "compute-dy-t2micro-[1-10]", "node": {"CPUs": 1, "RealMemory": 900},
               "provider": "aws", "options": {}}]


def test_a_cluster_whose_nodes_are_all_elastic_is_valid():
    burst = dict(GOOD, compute_hosts=[], nodes=[], elastic_nodesets=BURST_SETS,
                 partitions=[{"PartitionName": "compute", "Nodes": "compute-dy-t2micro-[1-10]", "Default": True}])
    assert cluster_problems(burst) == []


def test_a_cluster_without_any_node_names_the_elastic_sets_among_the_fixes():
    empty = dict(GOOD, compute_hosts=[], nodes=[], elastic_nodesets=[], partitions=[])
    problems = cluster_problems(empty)
    assert any("groups['slurmd']" in p and "slurm_elastic_nodesets" in p for p in problems), problems


def test_a_partition_may_list_elastic_nodes_beside_always_on_ones():
    mixed = dict(GOOD, elastic_nodesets=BURST_SETS,
                 partitions=[{"PartitionName": "p", "Nodes": "c[1-2],compute-dy-t2micro-[1-10]", "Default": True}])
    assert cluster_problems(mixed) == []
    unknown = dict(mixed, partitions=[{"PartitionName": "p", "Nodes": "compute-dy-t2micro-11", "Default": True}])
    assert any("compute-dy-t2micro-11" in p for p in cluster_problems(unknown))
