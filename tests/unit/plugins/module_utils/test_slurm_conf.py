import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_conf as sc


def join(names):
    return ",".join(names)


@pytest.mark.parametrize(
    "value, expected",
    [(True, "YES"), (False, "NO"), (3, "3"), ("a b", "a b"), (["x", "y"], "x,y"), ([True, 1], "YES,1")],
)
def test_format_value(value, expected):
    assert sc.format_value(value) == expected


def test_repeatable_keys_become_lines_and_others_join():
    lines = sc.render_settings({"SlurmctldHost": ["ctl1(10.0.0.1)", "ctl2"], "SchedulerParameters": ["bf_continue", "bf_interval=5"]})
    assert lines == ["SlurmctldHost=ctl1(10.0.0.1)", "SlurmctldHost=ctl2", "SchedulerParameters=bf_continue,bf_interval=5"]


def test_merge_is_case_insensitive_and_null_removes():
    merged = sc.merge(
        {"ProctrackType": "proctrack/cgroup", "MailProg": "/bin/true", "A": 1},
        {"proctracktype": "proctrack/linuxproc", "MailProg": None, "A": ""},
    )
    assert merged == {"proctracktype": "proctrack/linuxproc"}


def test_mapping_value_names_the_variable():
    with pytest.raises(sc.SlurmConfError, match=r"slurm_config\.SchedulerParameters: a mapping"):
        sc.render_settings({"SchedulerParameters": {"a": 1}})


@pytest.mark.parametrize("key", ["1abc", "a=b", "with space", 5])
def test_bad_key(key):
    with pytest.raises(sc.SlurmConfError, match="not a Slurm option name"):
        sc.render_settings({key: 1})


def test_records_name_key_first_and_lists_compressed():
    text = sc.render_slurm_conf(
        {"ClusterName": "c"},
        nodes=[{"CPUs": 2, "NodeName": ["n1", "n2"], "Gres": None, "Features": []}],
        partitions=[{"PartitionName": "p", "Nodes": ["n1", "n2"], "Default": True}],
        compress=join,
    )
    assert text == "ClusterName=c\n\nNodeName=n1,n2 CPUs=2\n\nPartitionName=p Nodes=n1,n2 Default=YES\n"


def test_record_without_name():
    with pytest.raises(sc.SlurmConfError, match=r"slurm_nodes\[0\]: every entry needs NodeName"):
        sc.render_records([{"CPUs": 1}], "NodeName", "slurm_nodes")


def test_newline_in_value_rejected():
    with pytest.raises(sc.SlurmConfError, match="newline"):
        sc.render_settings({"ClusterName": "a\nSlurmUser=root"})


OLD = "ClusterName=c\nSlurmctldPort=6817\nNodeName=n1 CPUs=2\n"


@pytest.mark.parametrize(
    "new, restart",
    [
        ("ClusterName=c\nSlurmctldPort=6817\nNodeName=n1 CPUs=4\n", False),
        ("ClusterName=c\nSlurmctldPort=6827\nNodeName=n1 CPUs=2\n", True),
        ("clustername=c\nAuthType=auth/jwt\nSlurmctldPort=6817\nNodeName=n1 CPUs=2\n", True),
        ("ClusterName=c # comment\nSlurmctldPort=6817\nNodeName=n1 CPUs=2\nMailProg=/bin/true\n", False),
    ],
)
def test_needs_restart(new, restart):
    assert sc.needs_restart(OLD, new) is restart


def test_no_previous_file_needs_restart():
    assert sc.needs_restart("", OLD) is True


def test_node_params_from_facts():
    facts = {"processor_vcpus": 8, "processor_count": 1, "processor_cores": 4, "processor_threads_per_core": 2, "memtotal_mb": 16000}
    assert sc.node_params_from_facts(facts, reserve_mb=512, overrides={"Features": "a"}) == {
        "CPUs": 8, "Sockets": 1, "CoresPerSocket": 4, "ThreadsPerCore": 2, "RealMemory": 15488, "Features": "a",
    }


def test_node_params_skip_inconsistent_topology():
    facts = {
        "ansible_processor_vcpus": 2,
        "ansible_processor_count": 1,
        "ansible_processor_cores": 4,
        "ansible_processor_threads_per_core": 1,
        "ansible_memtotal_mb": 100,
    }
    assert sc.node_params_from_facts(facts) == {"CPUs": 2, "RealMemory": 100}


def test_derive_nodes_groups_identical_hosts_in_first_seen_order():
    hosts = {
        "c1": {"CPUs": 2, "RealMemory": 100},
        "g1": {"CPUs": 8, "RealMemory": 100, "Gres": "gpu:1"},
        "c2": {"CPUs": 2, "RealMemory": 100},
    }
    assert sc.derive_nodes(hosts, join) == [
        {"NodeName": "c1,c2", "CPUs": 2, "RealMemory": 100},
        {"NodeName": "g1", "CPUs": 8, "RealMemory": 100, "Gres": "gpu:1"},
    ]


def test_k8s_gres_sized_from_the_node_and_keeps_other_gres():
    params = sc.add_k8s_gres({"CPUs": 8, "RealMemory": 16000, "Gres": "gpu:2,k8scpu:1"})
    assert params["Gres"] == "gpu:2,k8scpu:8,k8smemory:16000"


def test_k8s_gres_needs_cpus_and_memory():
    with pytest.raises(sc.SlurmConfError, match="needs CPUs and RealMemory"):
        sc.add_k8s_gres({"CPUs": 8})


def test_k8s_capacity_per_node_from_records():
    records = [
        {"NodeName": "c[1-2]", "CPUs": 8, "Gres": "gpu:1,k8scpu:8,k8smemory:16000"},
        {"NodeName": "d1", "CPUs": 4},
    ]
    expand = {"c[1-2]": ["c1", "c2"], "d1": ["d1"]}.__getitem__
    assert sc.k8s_capacity(records, expand) == {
        "c1": {"k8scpu": 8, "k8smemory": 16000},
        "c2": {"k8scpu": 8, "k8smemory": 16000},
    }
