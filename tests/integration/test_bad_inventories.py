"""Wrong inventories fail before any change, with a message naming the variable.

Each case writes an inventory whose hosts are docker containers that do not
exist: if validation let a case through, the next play would fail to connect
and the expected message would be missing, so the test fails.

Cases that need real facts or files (the memory reserve against the node's
RAM, the current slurm.conf of a converged host) run their hosts through the
local connection in the validation play only (reading this machine's facts and
files is read-only; the slurm.conf files are in the test's tmp dir, named by
slurm_config_dir) and as missing docker containers in every later play, so a
run that got past validation still changes nothing here.
"""

import base64
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "site.yml"
UPGRADE = ROOT / "playbooks" / "rolling_upgrade.yml"
# The ansible-playbook of the Python running the tests (each core of the matrix has its own venv).
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).parent / "ansible-playbook"
# Local in the validation play, a missing docker container in every other play.
LOCAL_IN_VALIDATION = "{{ 'local' if ansible_play_name is match('Validate') else 'community.docker.docker' }}"

GOOD_VARS = {"slurm_cluster_name": "bad", "slurm_nodes": [{"NodeName": "bad-c[1-2]", "CPUs": 2, "RealMemory": 1000}]}


def inventory(ctl=("bad-ctl1",), dbd=("bad-ctl1",), compute=("bad-c1", "bad-c2"), restd=(), host_vars=None, login=(), **overrides):
    variables = dict(GOOD_VARS, ansible_connection="community.docker.docker")
    variables.update(overrides)
    host_vars = host_vars or {}

    def hosts(names):
        return {name: host_vars.get(name) for name in names}

    groups = {"slurmctld": ctl, "slurmdbd": dbd, "slurmd": compute, "slurmrestd": restd}
    if login:
        groups["login"] = login
    # Hosts only in host_vars (another cluster's controller) join slurmctld.
    extra = [h for h in host_vars if not any(h in g for g in groups.values())]
    groups["slurmctld"] = tuple(ctl) + tuple(extra)
    return {"all": {"vars": variables, "children": {g: {"hosts": hosts(names)} for g, names in groups.items()}}}


def b64(data):
    return base64.b64encode(data).decode()


# A second cluster "other" (controller other-ctl1, sharing the slurmdbd host).
TWO_CLUSTERS = {"other-ctl1": {"slurm_cluster_name": "other"}}


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
    # slurm_common: the slurm.conf model
    "ClusterName in slurm_config differs from slurm_cluster_name": (
        inventory(slurm_config={"ClusterName": "other"}), "slurm_config.ClusterName: 'other' differs from slurm_cluster_name"),
    "partition MaxTime Slurm cannot parse": (
        inventory(slurm_partitions=[{"PartitionName": "p", "Nodes": "ALL", "MaxTime": "1h"}]),
        "slurm_partitions[0].MaxTime: Slurm cannot parse '1h'"),
    "partition DefaultTime Slurm cannot parse": (
        inventory(slurm_partitions=[{"PartitionName": "p", "Nodes": "ALL", "DefaultTime": "2 days"}]),
        "slurm_partitions[0].DefaultTime"),
    "non-numeric SlurmctldPort": (inventory(slurm_config={"SlurmctldPort": "ctl"}), "slurm_config.SlurmctldPort: 'ctl' is not a port"),
    "SlurmdPort equal to SlurmctldPort": (
        inventory(slurm_config={"SlurmdPort": 6817}), "slurm_config.SlurmdPort: port 6817 is also slurm_config.SlurmctldPort"),
    "slurm_gres name not in GresTypes": (
        inventory(slurm_config={"GresTypes": "gpu"}, slurm_gres=[{"Name": "mps", "Count": 100}]),
        "slurm_gres[0]: Name=mps is not in GresTypes"),
    "node Gres without a slurm_gres entry": (
        inventory(slurm_nodes=[{"NodeName": "bad-c[1-2]", "CPUs": 2, "Gres": "gpu:2"}]), "slurm_nodes[0].Gres: gpu is not in GresTypes"),
    "slurm_node_params Gres without a slurm_gres entry": (
        inventory(host_vars={"bad-c1": {"slurm_node_params": {"Gres": "fpga:1"}}}), "slurm_node_params.Gres: fpga"),
    "newline in a slurm_config value": (
        inventory(slurm_config={"SlurmctldDebug": "info\nSlurmUser=root"}), "slurm_config.SlurmctldDebug"),
    "carriage return in a cgroup.conf value": (
        inventory(slurm_cgroup_config={"ConstrainCores": "yes\rConstrainDevices=no"}), "slurm_cgroup_config.ConstrainCores"),
    "SlurmctldTimeout not a number": (inventory(slurm_config={"SlurmctldTimeout": "30s"}), "slurm_config.SlurmctldTimeout"),
    "k8s partition that does not exist": (inventory(slurm_k8s_partitions=["gpu"]), "slurm_k8s_partitions: 'gpu' is not in slurm_partitions"),
    "slurm_node_params CPUs not a number": (
        inventory(host_vars={"bad-c1": {"slurm_node_params": {"CPUs": "many"}}}), "slurm_node_params.CPUs: 'many'"),
    "relative slurm_config_dir": (inventory(slurm_config_dir="etc/slurm"), "slurm_config_dir: 'etc/slurm' must be an absolute path"),
    "slurm_dbd_hosts naming a host outside slurmdbd": (inventory(slurm_dbd_hosts=["dbd9"]), "slurm_dbd_hosts: dbd9"),
    # munge
    "relative munge_key_file": (inventory(munge_key_file="munge.key"), "munge_key_file: 'munge.key' must be an absolute path"),
    "non-numeric munge_gid": (inventory(munge_gid="munge"), "munge_gid: 'munge' must be a fixed numeric id"),
    # slurmdbd
    "non-numeric slurmdbd_storage_port": (inventory(slurmdbd_storage_port="mysql"), "slurmdbd_storage_port: 'mysql' is not a TCP port"),
    "newline in a slurmdbd_config value": (
        inventory(slurmdbd_config={"DebugLevel": "info\nStoragePass=x"}), "slurmdbd_config.DebugLevel"),
    "MariaDB size MariaDB cannot parse": (
        inventory(slurmdbd_mariadb_settings={"innodb_buffer_pool_size": "lots"}), "slurmdbd_mariadb_settings.innodb_buffer_pool_size"),
    "database name MariaDB refuses": (inventory(slurmdbd_storage_loc="acct-db"), "slurmdbd_storage_loc: 'acct-db'"),
    # slurmctld
    "relative StateSaveLocation": (inventory(slurm_config={"StateSaveLocation": "state"}), "slurm_config.StateSaveLocation"),
    "slurmctld_register_cluster not a boolean": (inventory(slurmctld_register_cluster="no"), "slurmctld_register_cluster: 'no' must be true or false"),
    # slurmd
    "slurmd_reregister_interval of 0": (inventory(slurmd_reregister_interval=0), "slurmd_reregister_interval: 0 must be"),
    "a partition named twice": (
        inventory(slurm_partitions=[{"PartitionName": "debug", "Nodes": "ALL"}, {"PartitionName": "debug", "Nodes": "ALL"}]),
        "slurm_partitions[1]: partition debug is already defined in slurm_partitions[0]"),
    "slurmd_serial that is no number": (inventory(slurmd_serial="lots"), "slurmd_serial: 'lots' is not a number of hosts"),
    "relative SlurmdSpoolDir": (inventory(slurm_config={"SlurmdSpoolDir": "spool"}), "slurm_config.SlurmdSpoolDir"),
    # slurmrestd
    "JWT key not base64": (inventory(restd=("bad-ctl1",), slurmrestd_jwt_key_b64="not base64!"), "slurmrestd_jwt_key_b64: not valid base64"),
    "JWT key too short": (inventory(restd=("bad-ctl1",), slurmrestd_jwt_key_b64=b64(b"short")), "slurmrestd_jwt_key_b64: the key is 5 bytes"),
    "slurmrestd_listen entry without a port": (inventory(restd=("bad-ctl1",), slurmrestd_listen=["0.0.0.0"]), "slurmrestd_listen[0]"),
    "slurmrestd_port not among the listen ports": (
        inventory(restd=("bad-ctl1",), slurmrestd_listen=["0.0.0.0:6820"], slurmrestd_port=6830),
        "slurmrestd_port: 6830 is not a port slurmrestd_listen opens"),
    "slurmrestd as SlurmUser": (inventory(restd=("bad-ctl1",), slurmrestd_user="slurm"), "slurmrestd_user: 'slurm'"),
    "newline in slurmrestd_extra_options": (
        inventory(restd=("bad-ctl1",), slurmrestd_extra_options="-v\nExecStartPre=/bin/sh"), "slurmrestd_extra_options"),
    # apptainer
    "newline in an apptainer_conf value": (
        inventory(apptainer_conf={"mount home": "yes\nmount hostfs = yes"}), "apptainer_conf.mount home"),
    "unknown apptainer_mode": (inventory(apptainer_mode="suid"), "apptainer_mode: 'suid'"),
    "apptainer url method without a URL": (inventory(apptainer_install_method="url"), "apptainer_package_url: set it"),
    "apptainer_image_dir_mode not octal": (inventory(apptainer_image_dir_mode="rwx"), "apptainer_image_dir_mode: 'rwx'"),
    # federation
    "features for a cluster that does not exist": (
        inventory(federation_cluster_features={"mars": ["red"]}), "federation_cluster_features: 'mars' is not a cluster"),
    "two clusters without a federation_name": (inventory(host_vars=TWO_CLUSTERS), "federation_name: the inventory has 2 clusters"),
    "feature name sacctmgr cannot hold": (
        inventory(federation_cluster_features={"bad": ["a,b"]}), "federation_cluster_features.bad: invalid feature name"),
    "non-numeric federation port": (inventory(federation_ports=[6817, "slurmd"]), "federation_ports[1]: 'slurmd' is not a TCP port"),
    # directory users (sssd)
    "sssd over plain ldap:// without StartTLS": (
        inventory(sssd_ldap_uri=["ldap://ldap.example.org"], sssd_ldap_search_base="dc=example,dc=org",
                  sssd_ldap_tls_cacert=str(ROOT / "lab" / "ldap" / "setup.sh")),
        "sssd_ldap_uri: ldap:// without sssd_ldap_id_use_start_tls: true sends the bind password"),
    "sssd bind DN without its password, and no CA": (
        inventory(sssd_ldap_uri=["ldaps://ldap.example.org"], sssd_ldap_search_base="dc=example,dc=org",
                  sssd_ldap_bind_dn="cn=sssd,dc=example,dc=org"),
        "sssd_ldap_bind_password: sssd_ldap_bind_dn cn=sssd,dc=example,dc=org is set without its password"),
    # shared filesystems
    "soft NFS mount for the homes": (
        inventory(shared_filesystems_mounts=[{"path": "/home", "src": "nfs1:/export/home", "purpose": "home", "opts": "soft"}]),
        "shared_filesystems_mounts[0].opts: soft makes a write fail when the NFS server is slow to answer"),
    "StateSaveLocation share on a compute node": (
        inventory(host_vars={"bad-c1": {"shared_filesystems_mounts": [
            {"path": "/var/lib/slurm/slurmctld", "src": "nfs1:/export/state", "purpose": "state"}]}}),
        "shared_filesystems_mounts[0].purpose: state is slurmctld's StateSaveLocation, and bad-c1 runs no slurmctld"),
    "HA pair with StateSaveLocation shared by one controller only": (
        inventory(ctl=("bad-ctl1", "bad-ctl2"), host_vars={"bad-ctl2": {"shared_filesystems_mounts": [
            {"path": "/var/lib/slurm/slurmctld", "src": "nfs1:/export/state", "purpose": "state"}]}}),
        "cluster bad's controllers bad-ctl2 mount StateSaveLocation from a share and bad-ctl1 do not"),
    # copilot
    "copilot_kubeconfig that does not exist": (
        inventory(copilot_kubeconfig="/nonexistent/kubeconfig"), "copilot_kubeconfig: /nonexistent/kubeconfig does not exist"),
    "newline in a copilot_config value": (inventory(copilot_config={"drain_sync": "a\nb"}), "copilot_config.drain_sync"),
    "copilot_metrics_port out of range": (inventory(copilot_metrics_port=70000), "copilot_metrics_port: 70000 is not a TCP port"),
    "copilot namespace Kubernetes refuses": (inventory(copilot_cluster_namespace="Slurm_NS"), "copilot_cluster_namespace: 'Slurm_NS'"),
    "copilot ServiceAccount name Kubernetes refuses": (
        inventory(copilot_service_account="Copilot_SA"), "copilot_service_account: 'Copilot_SA' is not a Kubernetes name"),
    "copilot_rbac_kubeconfig that does not exist": (
        inventory(copilot_rbac_kubeconfig="/nonexistent/admin"), "copilot_rbac_kubeconfig: /nonexistent/admin does not exist"),
    # accounting entities sacctmgr would refuse only in the accounting play, after the configuration plays
    "QoS flag Slurm does not know": (
        inventory(slurm_qos=[{"name": "gpu", "flags": ["DenyOnLimit", "NoSuchFlag"]}]),
        "slurm_qos[gpu].flags: unknown QoS flag 'nosuchflag'"),
    "QoS preempt mode Slurm does not know": (
        inventory(slurm_qos=[{"name": "gpu", "preempt_mode": "kill"}]), "slurm_qos[gpu].preempt_mode: unknown mode 'kill'"),
    # elastic node sets (cloud burst) and power_save
    "elastic node set without RealMemory": (
        inventory(slurm_elastic_nodesets=[{"name": "dy", "nodes": "bad-dy-[1-4]", "node": {"CPUs": 1}, "provider": "aws",
                                           "options": {"region": "eu-west-1", "launch_template": "lt", "munge_key_parameter": "/k"}}]),
        "slurm_elastic_nodesets[0].node.RealMemory: missing"),
    "elastic nodes named like an always-on node": (
        inventory(slurm_elastic_nodesets=[{"name": "dy", "nodes": "bad-c[2-3]", "node": {"CPUs": 1, "RealMemory": 100},
                                           "provider": "command",
                                           "options": {"resume_command": ["/bin/up"], "suspend_command": ["/bin/down"]}}]),
        "bad-c2 is also an always-on node"),
    "power saving key that is not one": (inventory(slurm_power_save={"SuspendTimeout": 30, "SlurmctldDebug": 3}),
                                         "slurm_power_save.SlurmctldDebug: not a power saving key"),
    "power_save reconcile interval of 0": (
        inventory(power_save_reconcile_interval=0,
                  slurm_elastic_nodesets=[{"name": "dy", "nodes": "bad-dy-[1-4]", "node": {"CPUs": 1, "RealMemory": 100},
                                           "provider": "docker", "options": {"image": "i", "network": "n"}}]),
        "power_save_reconcile_interval: 0 must be seconds"),
    # accounts, users and QoS as code (slurm_accounting) and the policy
    "user in an account that is not declared": (
        inventory(slurm_accounts=[{"name": "physics"}], slurm_users=[{"name": "alice", "accounts": ["phisics"]}]),
        "slurm_users[alice].accounts: account 'phisics' is not in slurm_accounts"),
    "account default QoS outside its QoS list": (
        inventory(slurm_qos=[{"name": "short"}], slurm_accounts=[{"name": "physics", "qos": ["short"], "default_qos": "normal"}]),
        "slurm_accounts[physics].default_qos: 'normal' is not in its qos list"),
    "QoS limit with a misspelt key": (
        inventory(slurm_qos=[{"name": "short", "max_jobs_per_users": 1}]), "slurm_qos[short]: unknown keys max_jobs_per_users"),
    "enforcement value Slurm does not know": (
        inventory(slurm_accounting_enforce=["associations", "strict"]), "slurm_accounting_enforce: 'strict'"),
    # ack_operator
    "ack_operator_kubeconfig that does not exist": (
        inventory(ack_operator_kubeconfig="/nonexistent/ack-kubeconfig"), "ack_operator_kubeconfig: /nonexistent/ack-kubeconfig does not exist"),
    "unknown ack_operator_mode": (inventory(ack_operator_mode="helm"), "ack_operator_mode: 'helm'"),
    "newline in ack_operator_cluster_values": (
        inventory(ack_operator_cluster_values={"image": "x\ny"}), "ack_operator_cluster_values.image"),
    "ack_operator_jwt_token_lifespan of 0": (inventory(ack_operator_jwt_token_lifespan=0), "ack_operator_jwt_token_lifespan: 0 must be seconds"),
    "ack mode without the database password": (
        inventory(ack_operator_mode="ack", slurmdbd_storage_host="db.example"),
        "slurmdbd_storage_pass: ACK's slurmdbd pod needs the database password"),
    "ack mode with ACK's copilot and no gres-strategy node": (
        inventory(ack_operator_mode="ack", slurmdbd_storage_host="db.example", slurmdbd_storage_pass="pw",
                  host_vars={h: {"slurm_k8s_shared": True, "slurm_k8s_strategy": "placeholder"} for h in ("bad-c1", "bad-c2")}),
        "ack_operator_enable_copilot: ACK's SlurmCopilot takes Kubernetes' share out of the count-only GRES"),
    # pam_slurm_adopt
    "pam_slurm_adopt on a login node that runs slurmd": (
        inventory(login=("bad-c1",), slurm_pam_slurm_adopt=True),
        "slurm_pam_slurm_adopt: bad-c1 is in group 'login' and in group 'slurmd'"),
    "pam_slurm_adopt action it does not know": (
        inventory(slurm_pam_slurm_adopt=True, pam_slurm_adopt_action_no_jobs="allow"), "pam_slurm_adopt_action_no_jobs: 'allow'"),
}


UPGRADE_CASES = {
    "upgrade batch that is not a number or a percentage": ({"slurm_upgrade_batch": "half"}, "slurm_upgrade_batch: 'half'"),
    "upgrade of a cluster that does not exist": ({"slurm_upgrade_cluster": "mars"}, "slurm_upgrade_cluster: 'mars' is not a cluster"),
    "upgrade on_timeout that is neither proceed nor fail": ({"slurm_upgrade_on_timeout": "skip"}, "slurm_upgrade_on_timeout: 'skip'"),
    "upgrade release that is not an apt release name": (
        {"slurm_upgrade_default_release": "sid; rm -rf /"}, "slurm_upgrade_default_release: 'sid; rm -rf /'"),
}


def run(inv, tmp_path, playbook=PLAYBOOK, extra_vars=None):
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inv))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CACHE_PLUGIN="memory", ANSIBLE_LOG_PATH="/dev/null")
    command = [str(ANSIBLE_PLAYBOOK), "-i", str(path), str(playbook)]
    if extra_vars:
        extra = tmp_path / "extra.yml"
        extra.write_text(yaml.safe_dump(extra_vars))
        command += ["-e", "@%s" % extra]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def assert_stopped_in_validation(returncode, out, expected, first_later_play="PLAY [MUNGE"):
    assert returncode != 0, out
    assert expected in out, out
    # Validation stopped the run: no later play started, no task changed anything.
    assert first_later_play not in out, out
    recap = [line for line in out.splitlines() if re.search(r"\bok=\d+ +changed=", line)]
    assert recap and all(" changed=0 " in line for line in recap), recap


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_inventory_fails_before_any_change(case, tmp_path):
    inv, expected = CASES[case]
    if inv["all"]["vars"].get("slurm_cluster_name") is None:
        del inv["all"]["vars"]["slurm_cluster_name"]
    assert_stopped_in_validation(*run(inv, tmp_path), expected)


def test_sssd_refusal_keeps_the_bind_password_out_of_the_log(tmp_path):
    inv = inventory(sssd_ldap_uri=["ldaps://ldap.example.org"], sssd_ldap_search_base="example.org",
                    sssd_ldap_tls_cacert="/nonexistent/ca.pem", sssd_ldap_bind_dn="cn=sssd,dc=example,dc=org",
                    sssd_ldap_bind_password="Vaulted-bind-pass-4711")
    returncode, out = run(inv, tmp_path)
    assert_stopped_in_validation(returncode, out, "sssd_ldap_search_base: give the directory's base DN")
    assert "sssd_ldap_tls_cacert: /nonexistent/ca.pem does not exist" in out
    assert "Vaulted-bind-pass-4711" not in out


def test_ack_mode_refusal_keeps_the_password_out_of_the_log(tmp_path):
    password = "Vaulted-db-pass-4711"
    returncode, out = run(inventory(ack_operator_mode="ack", slurmdbd_storage_pass=password), tmp_path)
    assert_stopped_in_validation(returncode, out, "slurmdbd_storage_host: 'localhost'; ACK's slurmdbd runs in a pod")
    assert password not in out


@pytest.mark.parametrize("case", sorted(UPGRADE_CASES))
def test_bad_upgrade_settings_fail_before_any_change(case, tmp_path):
    extra, expected = UPGRADE_CASES[case]
    assert_stopped_in_validation(*run(inventory(), tmp_path, UPGRADE, extra), expected, "PLAY [Accounting first")


# Cases on this machine's facts and files (see the module docstring).
def local_inventory(tmp_path, confs=None, **overrides):
    """Every host local in the validation play; confs: host -> its current slurm.conf text."""
    host_vars = overrides.pop("host_vars", {})
    for host in ("bad-ctl1", "bad-c1", "bad-c2") + tuple(host_vars):
        conf_dir = tmp_path / ("etc-slurm-" + host)
        conf_dir.mkdir(exist_ok=True)
        if host in (confs or {}):
            (conf_dir / "slurm.conf").write_text(confs[host])
        host_vars.setdefault(host, {})
        host_vars[host] = dict(host_vars[host] or {}, slurm_config_dir=str(conf_dir))
    inv = inventory(host_vars=host_vars, **overrides)
    inv["all"]["vars"].update(ansible_connection=LOCAL_IN_VALIDATION, ansible_python_interpreter="{{ ansible_playbook_python }}")
    return inv


def conf(cluster, controller):
    return "ClusterName=%s\nSlurmctldHost=%s\nNodeName=bad-c[1-2] CPUs=2\n" % (cluster, controller)


LOCAL_CASES = {
    "memory reserve larger than the node's RAM": (
        {"slurm_nodes": [], "slurm_node_memory_reserve_mb": 10 ** 9}, None,
        "slurm_node_memory_reserve_mb: 1000000000 MB is not less than"),
    # Read on the node itself by the facts step (the case: a node without the device).
    "a gres File the node does not have": (
        {"slurm_gres": [{"Name": "gpu", "File": "/dev/hybridhpc-no-such-gpu[0-1]", "NodeName": "bad-c1"}],
         "slurm_config": {"GresTypes": "gpu"}}, None,
        "slurm_gres[0].File: /dev/hybridhpc-no-such-gpu0, /dev/hybridhpc-no-such-gpu1 does not exist on bad-c1"),
    "renaming a converged cluster": (
        {}, {"bad-ctl1": conf("old", "bad-ctl1"), "bad-c1": conf("old", "bad-ctl1")}, "slurm_allow_cluster_rename: true"),
    "moving a node from another cluster": (
        {"host_vars": dict(TWO_CLUSTERS), "federation_name": "fed"},
        {"bad-ctl1": conf("bad", "bad-ctl1"), "bad-c2": conf("other", "other-ctl1")}, "slurm_allow_node_move: true"),
    "removing the cluster's only controller": (
        {}, {"bad-c1": conf("bad", "bad-ctl0"), "bad-c2": conf("bad", "bad-ctl0")}, "slurm_allow_controller_change: true"),
    # Slurm's other files: checked with the cluster's nodes (from the facts) and major.
    "a topology that leaves a node out": (
        {"slurm_topology": {"type": "tree", "switches": [{"name": "leaf1", "nodes": "bad-c1"}]}}, None,
        "slurm_topology: nodes bad-c2 are under no switch"),
    # Resolved on this machine by the facts step, as a compute node's name service (SSSD) would.
    "a user the compute nodes cannot resolve": (
        {"slurm_accounts": [{"name": "physics"}], "slurm_users": [{"name": "hybridhpc-no-such-user", "accounts": ["physics"]}]},
        None, "slurm_users: hybridhpc-no-such-user does not resolve on bad-c1"),
    "a Prolog script without #!, and a per-job /tmp based in /tmp": (
        {"slurm_scripts": [{"name": "log.sh", "type": "Prolog", "content": "logger prolog\n"}],
         "slurm_job_tmp": {"base_path": "/tmp/jobs"}}, None,
        "slurm_scripts[0].content: starts without '#!'"),
}
OPT_INS = {
    "renaming a converged cluster": "slurm_allow_cluster_rename",
    "moving a node from another cluster": "slurm_allow_node_move",
    "removing the cluster's only controller": "slurm_allow_controller_change",
}


@pytest.fixture
def untouched_etc_slurm():
    before = sorted(os.listdir("/etc/slurm")) if os.path.isdir("/etc/slurm") else None
    yield
    after = sorted(os.listdir("/etc/slurm")) if os.path.isdir("/etc/slurm") else None
    assert after == before, "the run changed /etc/slurm on the test machine"


@pytest.mark.parametrize("case", sorted(LOCAL_CASES))
def test_fact_and_file_checks_fail_before_any_change(case, tmp_path, untouched_etc_slurm):
    overrides, confs, expected = LOCAL_CASES[case]
    inv = local_inventory(tmp_path, confs, **dict(overrides))
    snapshot = {p: p.read_text() for p in tmp_path.rglob("slurm.conf")}
    assert snapshot or confs is None
    assert_stopped_in_validation(*run(inv, tmp_path), expected)
    assert {p: p.read_text() for p in tmp_path.rglob("slurm.conf")} == snapshot


@pytest.mark.parametrize("case", sorted(OPT_INS))
def test_dangerous_change_passes_validation_with_its_opt_in(case, tmp_path, untouched_etc_slurm):
    overrides, confs, _expected = LOCAL_CASES[case]
    returncode, out = run(local_inventory(tmp_path, confs, **dict(overrides, **{OPT_INS[case]: True})), tmp_path)
    # Validation passed: the next play started (and failed to reach the missing containers).
    assert "PLAY [MUNGE" in out, out
    assert "Refused for cluster" not in out, out


def test_good_ack_mode_inputs_pass_validation(tmp_path, untouched_etc_slurm):
    shared = {h: {"slurm_k8s_shared": True} for h in ("bad-c1", "bad-c2")}
    inv = local_inventory(tmp_path, restd=("bad-ctl1",), ack_operator_mode="ack", slurmdbd_storage_host="db.example",
                          slurmdbd_storage_pass="Vaulted-db-pass-4711", host_vars=shared,
                          slurm_nodes=[{"NodeName": "bad-c[1-2]", "CPUs": 2, "RealMemory": 1000,
                                        "Gres": "k8scpu:2,k8smemory:1000"}])
    returncode, out = run(inv, tmp_path)
    # Validation passed: the next play started (and failed to reach the missing containers).
    assert "PLAY [MUNGE" in out, out
    assert "Vaulted-db-pass-4711" not in out


def test_the_walkthroughs_all_elastic_burst_cluster_passes_validation(tmp_path, untouched_etc_slurm):
    # The reference walkthrough (aws-federation-walkthrough): cluster aws has ten elastic nodes and no
    # always-on one (sinfo: compute* up infinite 10 idle~ compute-dy-t2micro-[1-10]), federated as
    # cloudburst with the on-premises cluster.
    burst = {
        "slurm_cluster_name": "aws",
        "slurm_nodes": [],
        "slurm_elastic_nodesets": [{
            "name": "dy", "nodes": "compute-dy-t2micro-[1-10]", "node": {"CPUs": 1, "RealMemory": 900},
            "provider": "aws",
            "options": {"region": "eu-west-1", "launch_template": "lt-burst", "munge_key_parameter": "/hybridhpc/munge"}}],
        "slurm_partitions": [{"PartitionName": "compute", "Nodes": "compute-dy-t2micro-[1-10]", "Default": True,
                              "MaxTime": "INFINITE", "State": "UP"}],
    }
    returncode, out = run(local_inventory(tmp_path, host_vars={"aws-ctl1": burst}, federation_name="cloudburst"), tmp_path)
    # Validation passed for both clusters: the next play started (and failed to reach the missing containers).
    assert "no compute node" not in out, out
    assert "Invalid inputs" not in out, out
    assert "PLAY [MUNGE" in out, out
