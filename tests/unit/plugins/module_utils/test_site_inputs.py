import base64

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import site_inputs as si


@pytest.mark.parametrize("value", [0, 60, "60", "1:30", "2:00:00", "7-0", "1-12:30", "2-00:00:00", "UNLIMITED", "infinite", -1])
def test_slurm_time_accepts_what_slurm_parses(value):
    assert si.is_slurm_time(value)


@pytest.mark.parametrize("value", ["1h", "2 days", "1:2:3:4", "1-", "-5", "", True, "1d-2", "10:00 "[:-1] + "x"])
def test_slurm_time_refuses_the_rest(value):
    assert not si.is_slurm_time(value)


@pytest.mark.parametrize("value, ok", [(1, True), (65535, True), ("6817", True), (0, False), (65536, False),
                                       ("http", False), (True, False), (None, False), ("68 17", False)])
def test_is_port(value, ok):
    assert si.is_port(value) is ok


@pytest.mark.parametrize("value, expected", [(6817, (6817, 6817)), ("6817-6820", (6817, 6820)),
                                             ("6820-6817", None), ("a-b", None), ("1-70000", None)])
def test_port_range(value, expected):
    assert si.port_range(value) == expected


@pytest.mark.parametrize("value, ok", [("500M", True), ("12G", True), (1024, True), ("10", True),
                                       ("12GB", False), ("1.5G", False), ("big", False), (True, False)])
def test_is_size(value, ok):
    assert si.is_size(value) is ok


def test_control_chars_found_in_nested_values_and_keys():
    problems = si.control_char_problems({"a": ["ok", "x\ny"], "b\r": 1, "c": {"d": "t\x00"}}, "v")
    assert any(p.startswith("v.a[1]:") for p in problems)
    assert any("the key 'b\\r'" in p for p in problems)
    assert any(p.startswith("v.c.d:") for p in problems)
    assert si.control_char_problems({"a": "plain value", "b": [1, True]}, "v") == []


def test_gres_types_from_config_or_gres():
    assert si.gres_types({"slurm_config": {"GresTypes": "gpu,mps"}}) == {"gpu", "mps"}
    assert si.gres_types({"slurm_gres": [{"Name": "gpu"}], "k8s_gres": True}) == {"gpu", "k8scpu", "k8smemory"}


GOOD = {
    "slurm_cluster_name": "lab",
    "clusters": ["lab", "cloud"],
    "slurm_config": {"SlurmctldTimeout": 30, "SchedulerParameters": ["bf_interval=5"], "SlurmctldPort": "6815-6816"},
    "slurm_partitions": [{"PartitionName": "debug", "Nodes": "ALL", "MaxTime": "1:00:00", "DefaultTime": 30}],
    "slurm_gres": [{"Name": "gpu", "NodeName": "g[1-2]", "File": "/dev/nvidia[0-1]"}, {"Name": "mps", "Count": "100"}],
    "slurm_nodes": [{"NodeName": "g[1-2]", "CPUs": 8, "Gres": "gpu:2,mps:100"}],
    "slurm_k8s_partitions": ["debug"],
    "slurm_dbd_hosts": ["dbd1"], "dbd_group": ["dbd1"],
    "has_dbd": True, "has_restd": True, "slurmdbd_port": 6819, "slurmrestd_port": 6820,
    "slurm_node_params": {"Gres": "gpu:1", "RealMemory": 4000}, "slurm_node_memory_reserve_mb": 512,
    "slurm_k8s_strategy": "gres", "slurm_k8s_shared": False,
    "munge_uid": 64029, "munge_gid": 64029, "munge_key_file": "/etc/munge/munge.key", "munge_service_enabled": True,
    "slurmdbd_storage_port": 3306, "slurmdbd_storage_user": "slurm", "slurmdbd_storage_loc": "slurm_acct_db",
    "slurmdbd_storage_host": "localhost", "slurmdbd_config": {"DebugLevel": "info"},
    "slurmdbd_mariadb_settings": {"innodb_buffer_pool_size": "512M", "innodb_lock_wait_timeout": 900},
    "slurmctld_register_cluster": True, "slurmctld_hung_timeout": 0, "slurmd_reregister_interval": 15, "slurmd_serial": [1, "10%", "100%"],
    "slurmd_reregister_helper": "/usr/local/libexec/x",
    "slurmrestd_jwt_key_b64": base64.b64encode(b"k" * 32).decode(), "slurmrestd_jwks": '{"keys": []}',
    "slurm_jwt_jwks_file": "/etc/slurm/jwks.json", "slurmrestd_listen": ["0.0.0.0:6820", "unix:/run/s.sock"],
    "slurmrestd_user": "slurmrestd", "slurmrestd_uid": 64031, "slurm_uid": 64030, "slurmrestd_security": "auto",
    "apptainer_install_method": "package", "apptainer_mode": "userns",
    "apptainer_conf": {"mount hostfs": False, "bind path": ["/etc/hosts"], "root default capabilities": "no"},
    "apptainer_image_dir": "/srv/apptainer", "apptainer_image_dir_mode": "0755",
    "federation_name": "hybrid", "federation_cluster_features": {"lab": ["onprem"], "cloud": ["cloud", "burst"]},
    "federation_ports": [6817, 6818, 6819], "federation_srun_port_range": "60001-63000",
    "federation_name_resolution": "auto", "federation_firewall": "none", "federation_sync_timeout": 90,
    "copilot_kubeconfig": "/kube/config", "copilot_cluster_namespace": "slurm", "copilot_token_lifespan": 300,
    "copilot_metrics_port": 9466, "copilot_watchdog_sec": 60, "copilot_config": {"resync_interval": 10},
    "copilot_namespace_sandboxing": "auto", "copilot_slurmrestd_url": "http://ctl1:6820",
    "copilot_rbac_kubeconfig": "/kube/config", "copilot_service_account": "hybridhpc-copilot-lab",
    "copilot_service_account_namespace": "hybridhpc-copilot",
    "ack_operator_kubeconfig": "/kube/config", "ack_operator_mode": "bare_metal", "ack_operator_namespace": "ack-slurm-operator",
    "ack_operator_slurmrestd_port": 6820, "ack_operator_jwt_token_lifespan": 86400, "ack_operator_cluster_values": {},
    "shared_hosts": ["c1"],
}
ALL_ROLES = [r for r in si.ROLE_CHECKS if r not in ("rolling_upgrade", "slurm_node_facts")]


def _problems(inputs, roles=ALL_ROLES):
    checks = dict(si.ROLE_CHECKS)
    checks["copilot"] = lambda i: si.copilot_problems(i, isfile=lambda p: p == "/kube/config")
    checks["ack_operator"] = lambda i: si.ack_operator_problems(i, isfile=lambda p: p == "/kube/config")
    problems = []
    for role in roles:
        problems += checks[role]({k: v for k, v in inputs.items() if v is not None})
    return problems


def test_good_inputs_have_no_problem():
    assert _problems(GOOD) == []


def test_empty_inputs_have_no_problem():
    assert si.input_problems({}, ALL_ROLES) == []


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"slurm_config": {"ClusterName": "other"}}, "slurm_config.ClusterName: 'other' differs from slurm_cluster_name"),
        ({"slurm_config": {"SlurmctldPort": "abc"}}, "slurm_config.SlurmctldPort"),
        ({"slurm_config": {"SlurmdPort": 70000}}, "slurm_config.SlurmdPort"),
        ({"slurm_config": {"SlurmctldPort": "6817-6818"}}, "slurm_config.SlurmdPort: port 6818 is also slurm_config.SlurmctldPort"),
        ({"slurmrestd_port": 6815, "slurmrestd_listen": ["0.0.0.0:6815"]}, "slurmrestd_port: port 6815 is also"),
        ({"slurm_config": {"SrunPortRange": "60000"}}, "slurm_config.SrunPortRange"),
        ({"slurm_config": {"SlurmctldTimeout": "30s"}}, "slurm_config.SlurmctldTimeout"),
        ({"slurm_config": {"SchedulerParameters": "a\nb"}}, "slurm_config.SchedulerParameters"),
        ({"slurm_cgroup_config": {"ConstrainCores": "yes\rno"}}, "slurm_cgroup_config.ConstrainCores"),
        ({"slurm_partitions": [{"PartitionName": "p", "MaxTime": "1h"}]}, "slurm_partitions[0].MaxTime: Slurm cannot parse"),
        ({"slurm_partitions": [{"PartitionName": "p", "DefaultTime": "2 days"}]}, "slurm_partitions[0].DefaultTime"),
        ({"slurm_k8s_partitions": ["nope"]}, "slurm_k8s_partitions: 'nope'"),
        ({"slurm_partitions": [{"PartitionName": "debug"}, {"PartitionName": "gpu"}, {"partitionname": "debug"}]},
         "slurm_partitions[2]: partition debug is already defined in slurm_partitions[0]"),
        ({"slurm_nodesets": [{"NodeSet": "ns", "Feature": "a"}, {"NodeSet": "ns", "Feature": "b"}]},
         "slurm_nodesets[1]: node set ns is already defined"),
        ({"slurm_config": {"GresTypes": "gpu"}}, "slurm_gres[1]: Name=mps is not in GresTypes"),
        ({"slurm_nodes": [{"NodeName": "g1", "CPUs": 1, "Gres": "fpga:1"}]}, "slurm_nodes[0].Gres: fpga"),
        ({"slurm_gres": [{"Name": "gpu", "Count": "1.5G"}]}, "slurm_gres[0].Count"),
        ({"slurm_gres": [{"Name": "gpu", "File": "nvidia0"}]}, "slurm_gres[0].File"),
        ({"slurm_dbd_hosts": ["nodbd"]}, "slurm_dbd_hosts: nodbd"),
        ({"slurm_config_dir": "etc/slurm"}, "slurm_config_dir"),
        ({"slurm_node_params": {"Gres": "fpga:1"}}, "slurm_node_params.Gres: fpga"),
        ({"slurm_node_params": {"CPUs": "many"}}, "slurm_node_params.CPUs"),
        ({"slurm_node_params": "CPUs=4"}, "slurm_node_params: must be a mapping"),
        ({"slurm_node_memory_reserve_mb": -1}, "slurm_node_memory_reserve_mb"),
        ({"slurm_k8s_strategy": "taint"}, "slurm_k8s_strategy"),
        ({"munge_uid": "munge"}, "munge_uid"),
        ({"munge_key_file": "munge.key"}, "munge_key_file"),
        ({"munge_service_enabled": "yes"}, "munge_service_enabled"),
        ({"slurmdbd_storage_port": "mysql"}, "slurmdbd_storage_port"),
        ({"slurmdbd_storage_loc": "acct-db"}, "slurmdbd_storage_loc"),
        ({"slurmdbd_storage_user": "sl urm"}, "slurmdbd_storage_user"),
        ({"slurmdbd_config": {"DbdPort": "x"}}, "slurmdbd_config.DbdPort"),
        ({"slurmdbd_config": {"DebugLevel": "info\nPurgeJobAfter=1"}}, "slurmdbd_config.DebugLevel"),
        ({"slurmdbd_mariadb_settings": {"innodb_buffer_pool_size": "lots"}}, "slurmdbd_mariadb_settings.innodb_buffer_pool_size"),
        ({"slurmdbd_mariadb_settings": {"bad key": 1}}, "slurmdbd_mariadb_settings: 'bad key'"),
        ({"slurm_config": {"StateSaveLocation": "var/lib"}}, "slurm_config.StateSaveLocation"),
        ({"slurm_config": {"SlurmdSpoolDir": "spool"}}, "slurm_config.SlurmdSpoolDir"),
        ({"slurmctld_register_cluster": "no"}, "slurmctld_register_cluster"),
        ({"slurmctld_hung_timeout": "soon"}, "slurmctld_hung_timeout: 'soon' must be a number of seconds"),
        ({"slurmctld_hung_timeout": -1}, "slurmctld_hung_timeout"),
        ({"slurmd_reregister_interval": 0}, "slurmd_reregister_interval"),
        ({"slurmd_serial": "lots"}, "slurmd_serial: 'lots' is not a number of hosts"),
        ({"slurmd_serial": "0%"}, "slurmd_serial"),
        ({"slurmd_serial": 0}, "slurmd_serial"),
        ({"slurmd_serial": [1, "x"]}, "slurmd_serial"),
        ({"slurmrestd_jwt_key_b64": "not base64!"}, "slurmrestd_jwt_key_b64: not valid base64"),
        ({"slurmrestd_jwt_key_b64": base64.b64encode(b"short").decode()}, "slurmrestd_jwt_key_b64: the key is 5 bytes"),
        ({"slurmrestd_jwks": "{not json"}, "slurmrestd_jwks"),
        ({"slurm_jwt_jwks_file": ""}, "slurm_jwt_jwks_file"),
        ({"slurmrestd_listen": ["6820"]}, "slurmrestd_listen[0]"),
        ({"slurmrestd_listen": ["unix:run/s.sock", "0.0.0.0:6820"]}, "slurmrestd_listen[0]"),
        ({"slurmrestd_port": 6821}, "slurmrestd_port: 6821 is not a port slurmrestd_listen opens"),
        ({"slurmrestd_user": "slurm"}, "slurmrestd_user"),
        ({"slurmrestd_uid": 64030}, "slurmrestd_uid: equals slurm_uid"),
        ({"slurmrestd_extra_options": "-v\nExecStartPre=/bin/sh"}, "slurmrestd_extra_options"),
        ({"slurmrestd_security": "off"}, "slurmrestd_security"),
        ({"apptainer_conf": {"mount home": "yes\nmount hostfs = yes"}}, "apptainer_conf.mount home"),
        ({"apptainer_conf": {"Mount=Home": "yes"}}, "apptainer_conf: 'Mount=Home'"),
        ({"apptainer_mode": "suid"}, "apptainer_mode"),
        ({"apptainer_install_method": "url"}, "apptainer_package_url: set it"),
        ({"apptainer_image_dir_mode": "755x"}, "apptainer_image_dir_mode"),
        ({"apptainer_image_dir": "srv"}, "apptainer_image_dir"),
        ({"federation_name": None}, "federation_name: the inventory has 2 clusters"),
        ({"federation_name": "My Fed"}, "federation_name: 'My Fed'"),
        ({"federation_cluster_features": {"mars": ["x"]}}, "federation_cluster_features: 'mars' is not a cluster"),
        ({"federation_cluster_features": {"lab": ["a,b"]}}, "federation_cluster_features.lab"),
        ({"federation_cluster_features": {"lab": "onprem"}}, "federation_cluster_features.lab"),
        ({"federation_ports": [6817, "x"]}, "federation_ports[1]"),
        ({"federation_srun_port_range": "60001"}, "federation_srun_port_range"),
        ({"federation_firewall": "iptables"}, "federation_firewall"),
        ({"federation_sync_timeout": "soon"}, "federation_sync_timeout"),
        ({"copilot_kubeconfig": "/missing/kubeconfig"}, "copilot_kubeconfig: /missing/kubeconfig does not exist"),
        ({"copilot_cluster_namespace": "Slurm_NS"}, "copilot_cluster_namespace"),
        ({"copilot_token_lifespan": 5}, "copilot_token_lifespan"),
        ({"copilot_metrics_port": 0}, "copilot_metrics_port"),
        ({"copilot_config": {"drain_sync": "a\nb"}}, "copilot_config.drain_sync"),
        ({"copilot_config": "resync"}, "copilot_config: must be a mapping"),
        ({"copilot_slurmrestd_url": "ctl1:6820"}, "copilot_slurmrestd_url"),
        ({"copilot_namespace_sandboxing": "maybe"}, "copilot_namespace_sandboxing"),
        ({"copilot_rbac_kubeconfig": "/missing/admin"}, "copilot_rbac_kubeconfig: /missing/admin does not exist"),
        ({"copilot_service_account": "Copilot_SA"}, "copilot_service_account: 'Copilot_SA' is not a Kubernetes name"),
        ({"copilot_service_account_namespace": "-ns"}, "copilot_service_account_namespace: '-ns' is not a Kubernetes name"),
        ({"ack_operator_kubeconfig": "/missing"}, "ack_operator_kubeconfig: /missing does not exist"),
        ({"ack_operator_mode": "helm"}, "ack_operator_mode"),
        ({"ack_operator_namespace": "ACK"}, "ack_operator_namespace"),
        ({"ack_operator_slurmrestd_port": "x"}, "ack_operator_slurmrestd_port"),
        ({"ack_operator_jwt_token_lifespan": 0}, "ack_operator_jwt_token_lifespan"),
        ({"ack_operator_cluster_values": {"a": "x\ny"}}, "ack_operator_cluster_values.a"),
        ({"ack_operator_kube_context": "a b"}, "ack_operator_kube_context"),
    ],
)
def test_each_problem_names_the_variable(change, fragment):
    problems = _problems(dict(GOOD, **change))
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("reserve, params, nodes, bad", [
    (512, {}, [], False),
    (4096, {}, [], True),
    (4000, {}, [], True),
    (4096, {"RealMemory": 1000}, [], False),
    (4096, {}, [{"NodeName": "c1", "CPUs": 1}], False),
])
def test_memory_reserve_against_the_node_memory(reserve, params, nodes, bad):
    problems = si.input_problems({"slurm_node_memory_reserve_mb": reserve, "slurm_node_params": params, "slurm_nodes": nodes,
                                  "facts": {"memtotal_mb": 4000}}, ["slurm_node_facts"])
    assert bool(problems) is bad, problems
    assert all(p.startswith("slurm_node_memory_reserve_mb:") for p in problems)


UPGRADE_GOOD = {"clusters": ["lab"], "slurm_upgrade_cluster": "lab", "slurm_upgrade_batch": "10%",
                "slurm_upgrade_max_fail_percentage": 0, "slurm_upgrade_drain_timeout": 3600,
                "slurm_upgrade_on_timeout": "proceed", "slurm_upgrade_version": "23.11.10-1",
                "slurm_upgrade_backup": True, "slurm_upgrade_reason": "upgrade"}


def test_good_upgrade_inputs():
    assert si.input_problems(UPGRADE_GOOD, ["rolling_upgrade"]) == []
    assert si.input_problems({"clusters": ["lab"]}, ["rolling_upgrade"]) == []


@pytest.mark.parametrize("change, var", [
    ({"slurm_upgrade_cluster": "mars"}, "slurm_upgrade_cluster"),
    ({"slurm_upgrade_batch": "0"}, "slurm_upgrade_batch"),
    ({"slurm_upgrade_batch": "150%"}, "slurm_upgrade_batch"),
    ({"slurm_upgrade_max_fail_percentage": 101}, "slurm_upgrade_max_fail_percentage"),
    ({"slurm_upgrade_drain_timeout": "1h"}, "slurm_upgrade_drain_timeout"),
    ({"slurm_upgrade_on_timeout": "skip"}, "slurm_upgrade_on_timeout"),
    ({"slurm_upgrade_version": "23.11; rm -rf"}, "slurm_upgrade_version"),
    ({"slurm_upgrade_backup": "maybe"}, "slurm_upgrade_backup"),
    ({"slurm_upgrade_reason": "a\nb"}, "slurm_upgrade_reason"),
])
def test_bad_upgrade_inputs(change, var):
    problems = si.input_problems(dict(UPGRADE_GOOD, **change), ["rolling_upgrade"])
    assert problems and problems[0].startswith(var + ":"), problems


def test_unknown_role_is_an_error():
    with pytest.raises(ValueError):
        si.input_problems({}, ["nope"])


def test_a_kubeconfig_without_shared_nodes_is_no_error():
    """AWX job templates attach a site's kubeconfig credential to every job; the
    copilot and ack plays simply have nothing to do on a cluster no pod shares."""
    from ansible_collections.hybridhpc.slurm.plugins.module_utils.site_inputs import ack_operator_problems, copilot_problems

    assert copilot_problems({"copilot_kubeconfig": __file__, "shared_hosts": []}) == []
    assert ack_operator_problems({"ack_operator_kubeconfig": __file__, "shared_hosts": []}) == []


# ACK mode: what ACK's charts need of the model (a good ack-mode controller first).
ACK_GOOD = {"ack_operator_mode": "ack", "accounting": True, "slurmdbd_storage_host": "db.example",
            "slurmdbd_storage_pass_set": True, "k8s_gres": True, "slurm_auth_jwt": True}


def test_good_ack_mode_inputs():
    assert si.ack_operator_problems(ACK_GOOD) == []
    assert si.ack_operator_problems(dict(ACK_GOOD, accounting=False, slurmdbd_storage_pass_set=False,
                                         slurmdbd_storage_host="localhost")) == []
    assert si.ack_operator_problems(dict(ACK_GOOD, k8s_gres=False, ack_operator_enable_copilot=False)) == []


@pytest.mark.parametrize("change, start", [
    ({"slurmdbd_storage_pass_set": False}, "slurmdbd_storage_pass: ACK's slurmdbd pod needs the database password"),
    ({"slurmdbd_storage_host": None}, "slurmdbd_storage_host: 'localhost'; ACK's slurmdbd runs in a pod"),
    ({"slurmdbd_storage_host": "127.0.0.1"}, "slurmdbd_storage_host: '127.0.0.1'"),
    ({"k8s_gres": False}, "ack_operator_enable_copilot: ACK's SlurmCopilot takes Kubernetes' share out of the count-only GRES"),
    ({"slurm_auth_jwt": False}, "slurm_auth_jwt: ACK's slurmrestd and SlurmCopilot authenticate with JWT"),
    ({"slurm_jwt_jwks_file": "/etc/slurm/jwks.json"}, "slurm_jwt_jwks_file: ack mode mounts only the HS256 key"),
    ({"ack_operator_enable_copilot": "yes"}, "ack_operator_enable_copilot: 'yes' must be true or false"),
])
def test_each_ack_mode_problem_names_the_variable_and_the_fix(change, start):
    inputs = {k: v for k, v in dict(ACK_GOOD, **change).items() if v is not None}
    problems = si.input_problems(inputs, ["ack_operator"])
    assert [p for p in problems if p.startswith(start)], problems


def test_ack_mode_rules_are_for_ack_mode_only():
    assert si.ack_operator_problems(dict(ACK_GOOD, ack_operator_mode="bare_metal", slurmdbd_storage_pass_set=False,
                                         k8s_gres=False, slurm_auth_jwt=False)) == []


def test_partition_names_differing_in_case_are_two_partitions():
    # slurmctld compares partition names as written (xstrcmp).
    assert si.duplicate_name_problems([{"PartitionName": "Debug"}, {"PartitionName": "debug"}],
                                      "slurm_partitions", "PartitionName", "partition") == []


def test_gres_files_of_a_node_expand_ranges_and_follow_nodename():
    gres = [
        {"Name": "gpu", "File": "/dev/nvidia[0-1]", "NodeName": "g[1-2]"},
        {"Name": "gpu", "File": "/dev/nvidia2", "NodeName": "g3"},
        {"Name": "mps", "Count": 100},
        {"Name": "nic", "File": "/dev/infiniband/uverbs0"},
    ]
    assert si.gres_files_of_node(gres, "g2") == ["/dev/nvidia0", "/dev/nvidia1", "/dev/infiniband/uverbs0"]
    assert si.gres_files_of_node(gres, "g3") == ["/dev/nvidia2", "/dev/infiniband/uverbs0"]


def test_a_gres_file_the_node_lacks_names_the_record_and_the_node():
    gres = [{"Name": "gpu", "File": "/dev/nvidia[0-1]", "NodeName": "g1"}]
    problems = si.gres_file_problems(gres, "g1", ["/dev/nvidia1"])
    assert len(problems) == 1 and problems[0].startswith("slurm_gres[0].File: /dev/nvidia1 does not exist on g1")
    assert si.gres_file_problems(gres, "g2", ["/dev/nvidia1"]) == []
    assert si.gres_file_problems(gres, "g1", []) == []
