"""ACK mode writes only chart values ACK's documentation names.

The values are rendered the way a play renders them: slurm_common's defaults,
vars and published facts, then the ack_operator role's defaults and vars
(whose model goes through the slurm_ack_cluster_values filter), for a small
inventory and its variants. Every key must be in the documented keys below,
taken from ACK's walkthrough ("Container Service for Kubernetes: Colocated
scheduling for Slurm HPC and Kubernetes", Alibaba Cloud documentation as
updated 2026-03-27; the sections are named at each key); the pod-level values
must make a valid Pod.
"""

import base64
import copy
import pathlib

import kubernetes_validate
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from templating import trusted

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
K8S_VERSION = "1.31"

# ---------------------------------------------------------------- documented keys
# A key maps to None (a value: a scalar, or a Kubernetes object the Pod check
# below validates), to a mapping of its documented sub-keys, or to a one-item
# list holding the documented keys of each element.

# "Resources and parameters", the table of key parameters: headNodeConfig.X,
# slurmdbdConfigs.X, slurmrestdConfigs.X and workerNodesConfig.workerGroups[].X
# for each X below ("Specifies X for the respective Pod" / "primary container").
POD_CONFIG = dict.fromkeys([
    "hostNetwork", "setHostnameAsFQDN", "nodeSelector", "tolerations", "affinity", "resources", "image",
    "imagePullSecrets", "podSecurityContext", "securityContext", "volumeMounts", "volumes",
])
DOCUMENTED_CLUSTER_VALUES = {
    # Key parameters table: clusterName ("Must match ClusterName in the Slurm configuration files").
    "clusterName": None,
    # Resources table: Role {{ .Values.slurmOperatorNamespace }}/{{ .Values.clusterName }}.
    "slurmOperatorNamespace": None,
    "headNodeConfig": POD_CONFIG,
    "workerNodesConfig": {"deleteSelfBeforeSuspend": None, "workerGroups": [POD_CONFIG]},
    "slurmdbdConfigs": POD_CONFIG,
    "slurmrestdConfigs": POD_CONFIG,
    "slurmConfigs": {
        "slurmConfigPathInPod": None,
        "createConfigsByConfigMap": None,
        "configMapName": None,
        # "Step 3: Configure Slurm": the files its filesInConfigMap example holds.
        "filesInConfigMap": {"gres.conf": None, "slurmdbd.conf": None, "slurm.conf": None},
    },
    "mungeConfigs": {"mungeConfigPathInPod": None, "createConfigsBySecret": None, "secretName": None, "content": None},
}
# "Install ack-slurm-operator", step 3: enableCopilot and watchNamespace.
DOCUMENTED_OPERATOR_VALUES = {"enableCopilot": None, "watchNamespace": None}
# Where each documented pod-level key goes in a Pod (Kubernetes' own names).
POD_SPEC_KEYS = {"hostNetwork": "hostNetwork", "setHostnameAsFQDN": "setHostnameAsFQDN", "nodeSelector": "nodeSelector",
                 "tolerations": "tolerations", "affinity": "affinity", "imagePullSecrets": "imagePullSecrets",
                 "volumes": "volumes", "podSecurityContext": "securityContext"}
CONTAINER_KEYS = ("resources", "image", "securityContext", "volumeMounts")


def undocumented(values, documented, path=""):
    """Paths of the keys in ``values`` that ``documented`` does not name."""
    if documented is None or values is None:
        return []
    if isinstance(documented, list):
        if not isinstance(values, list):
            return ["%s: a list in the documentation, %r here" % (path, type(values).__name__)]
        return [p for i, item in enumerate(values) for p in undocumented(item, documented[0], "%s[%d]" % (path, i))]
    if not isinstance(values, dict):
        return ["%s: a mapping in the documentation, %r here" % (path, type(values).__name__)]
    found = []
    for key, value in values.items():
        where = "%s.%s" % (path, key) if path else key
        if key not in documented:
            found.append(where)
        else:
            found += undocumented(value, documented[key], where)
    return found


def pod_of(config):
    """A Pod carrying one pod config's documented keys where Kubernetes has them."""
    spec = {POD_SPEC_KEYS[k]: v for k, v in config.items() if k in POD_SPEC_KEYS}
    container = {"name": "slurm", "image": "slurm"}
    container.update({k: v for k, v in config.items() if k in CONTAINER_KEYS})
    spec["containers"] = [container]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


# ---------------------------------------------------------------- the role's values, as a play renders them

JWT_KEY = base64.b64encode(b"j" * 32).decode()
MUNGE_KEY = base64.b64encode(bytes(range(256)) * 4).decode()
FACTS = {"processor_vcpus": 8, "processor_count": 1, "processor_cores": 4, "processor_threads_per_core": 2,
         "memtotal_mb": 16512}


def _yaml(path):
    return yaml.safe_load(path.read_text()) or {}


def _published_facts():
    """slurm_common's set_fact of facts.yml, minus what needs a host (packages)."""
    (task,) = [t for t in _yaml(ROLES / "slurm_common" / "tasks" / "facts.yml") if "ansible.builtin.set_fact" in t
               and "slurm_common_config" in t["ansible.builtin.set_fact"]]
    facts = dict(task["ansible.builtin.set_fact"])
    for name in ("slurm_common_host_packages", "slurm_common_fresh_packages"):
        facts.pop(name)
    return facts


def inventory(**overrides):
    """One cluster: a controller (slurmctld, slurmdbd, slurmrestd) and two compute hosts shared with Kubernetes."""
    computes = {"cn001": {"slurm_k8s_shared": True}, "cn002": {"slurm_k8s_shared": True}}
    for host, hv in overrides.pop("hostvars", {}).items():
        computes[host].update(hv)
    common = {"slurm_cluster_name": "onprem"}
    hostvars = {"ctl1": dict(common)}
    for host, hv in computes.items():
        hostvars[host] = dict(common, ansible_facts=FACTS, **hv)
    inv = {
        "inventory_hostname": "ctl1",
        "groups": {"all": list(hostvars), "slurmctld": ["ctl1"], "slurmdbd": ["ctl1"], "slurmrestd": ["ctl1"],
                   "slurmd": list(computes)},
        "hostvars": hostvars,
        "slurm_cluster_name": "onprem",
        "ack_operator_mode": "ack",
        "ack_operator_kubeconfig": "/kube/config",
        "slurmdbd_storage_host": "db.example",
        "slurmdbd_storage_pass": "s3cret-pass",
        "__ack_operator_jwt_key": {"content": JWT_KEY},
        "__ack_operator_munge_key": {"content": MUNGE_KEY},
    }
    inv.update(overrides)
    return inv


def render(expression, inv):
    variables = {}
    for path in (ROLES / "slurm_common" / "defaults" / "main.yml", ROLES / "slurm_common" / "vars" / "main.yml"):
        variables.update(_yaml(path))
    variables.update(_published_facts())
    for path in (ROLES / "ack_operator" / "defaults" / "main.yml", ROLES / "ack_operator" / "vars" / "main.yml"):
        variables.update(_yaml(path))
    variables.update(copy.deepcopy(inv))
    loader = DataLoader()
    loader.set_basedir(str(ROLES / "ack_operator"))
    return Templar(loader=loader, variables=trusted(variables)).template(trusted(expression))


def cluster_values(**overrides):
    return render("{{ __ack_operator_cluster_values }}", inventory(**overrides))


VARIANTS = {
    "default": {},
    "no accounting": {"slurm_accounting": False},
    "placeholder nodes": {"hostvars": {"cn001": {"slurm_k8s_strategy": "placeholder"},
                                       "cn002": {"slurm_k8s_strategy": "placeholder"}},
                          "ack_operator_enable_copilot": False},
    "one gres node, a gpu": {"hostvars": {"cn002": {"slurm_k8s_strategy": "placeholder"}},
                             "slurm_gres": [{"Name": "gpu", "NodeName": "cn001", "File": "/dev/nvidia0"}],
                             "slurm_jwt_disable_token_creation": True},
    "dbd settings and extra values": {"slurmdbd_config": {"CommitDelay": 1, "DebugLevel": "info"},
                                      "slurmdbd_port": 7031, "munge_key_b64": MUNGE_KEY,
                                      "ack_operator_cluster_values": {"headNodeConfig": {"image": "slurm:24.11"}}},
}


@pytest.fixture(scope="module", params=sorted(VARIANTS), ids=sorted(VARIANTS))
def values(request):
    return cluster_values(**VARIANTS[request.param])


def test_every_cluster_value_is_documented(values):
    assert undocumented(values, DOCUMENTED_CLUSTER_VALUES) == []


def test_operator_values_are_documented():
    values = render("{{ __ack_operator_operator_values }}", inventory())
    assert values == {"enableCopilot": True, "watchNamespace": "slurm"}
    assert undocumented(values, DOCUMENTED_OPERATOR_VALUES) == []


def test_pod_configs_are_valid_kubernetes(values):
    configs = [values[k] for k in ("headNodeConfig", "slurmdbdConfigs", "slurmrestdConfigs") if values.get(k)]
    assert configs
    for config in configs:
        kubernetes_validate.validate(pod_of(config), K8S_VERSION, strict=True)
        (mount,) = config["volumeMounts"]
        assert mount["mountPath"] == "/var/jwt"


def test_the_checker_names_an_undocumented_key():
    values = cluster_values()
    values["mungeKeySecret"] = {"data": "x"}
    values["slurmConfigs"]["filesInConfigMap"]["cgroup.conf"] = ""
    values["headNodeConfig"]["replicas"] = 2
    assert sorted(undocumented(values, DOCUMENTED_CLUSTER_VALUES)) == [
        "headNodeConfig.replicas", "mungeKeySecret", "slurmConfigs.filesInConfigMap.cgroup.conf"]


def lines(text):
    return [line for line in text.splitlines() if line.strip()]


def test_slurmdbd_conf_comes_from_the_accounting_variables():
    files = cluster_values()["slurmConfigs"]["filesInConfigMap"]
    dbd = lines(files["slurmdbd.conf"])
    for line in ("StorageHost=db.example", "StoragePort=3306", "StorageUser=slurm", "StorageLoc=slurm_acct_db",
                 "StorageType=accounting_storage/mysql", "DbdPort=6819", "LogFile=/var/log/slurmdbd.log",
                 "AuthAltParameters=jwt_key=/var/jwt/jwt_hs256.key"):
        assert line in dbd
    assert dbd[-1] == "StoragePass=s3cret-pass"
    slurm = lines(files["slurm.conf"])
    for line in ("AccountingStorageHost=onprem-slurmdbd", "AccountingStoragePort=6819",
                 "AccountingStorageType=accounting_storage/slurmdbd", "AuthAltParameters=jwt_key=/var/jwt/jwt_hs256.key"):
        assert line in slurm


def test_slurmdbd_config_and_port_reach_slurmdbd_conf():
    values = cluster_values(**VARIANTS["dbd settings and extra values"])
    dbd = lines(values["slurmConfigs"]["filesInConfigMap"]["slurmdbd.conf"])
    assert {"CommitDelay=1", "DebugLevel=info", "DbdPort=7031"} <= set(dbd)
    assert "AccountingStoragePort=7031" in values["slurmConfigs"]["filesInConfigMap"]["slurm.conf"]
    assert values["headNodeConfig"]["image"] == "slurm:24.11"
    assert values["headNodeConfig"]["volumes"]


def test_slurmdbd_config_cannot_blank_the_password():
    values = cluster_values(slurmdbd_config={"storagepass": ""})
    assert lines(values["slurmConfigs"]["filesInConfigMap"]["slurmdbd.conf"])[-1] == "StoragePass=s3cret-pass"


def test_without_accounting_there_is_no_slurmdbd():
    values = cluster_values(slurm_accounting=False)
    # null: Helm drops the chart's own default (no slurmdbd pod, no slurmdbd.conf).
    assert values["slurmdbdConfigs"] is None
    assert values["slurmConfigs"]["filesInConfigMap"]["slurmdbd.conf"] is None
    assert "AccountingStorage" not in values["slurmConfigs"]["filesInConfigMap"]["slurm.conf"]


def test_without_the_password_accounting_is_refused():
    with pytest.raises(Exception, match="slurmdbd_storage_pass"):
        cluster_values(slurmdbd_storage_pass="")


def test_the_generated_munge_key_is_in_the_munge_secret():
    munge = cluster_values()["mungeConfigs"]
    assert munge["createConfigsBySecret"] is True
    assert base64.b64decode(munge["content"], validate=True) == base64.b64decode(MUNGE_KEY)


def test_a_given_munge_key_wins_over_the_installed_one():
    given = base64.b64encode(b"g" * 1024).decode()
    assert cluster_values(munge_key_b64=given)["mungeConfigs"]["content"] == given


def test_no_munge_key_is_refused_not_left_empty():
    with pytest.raises(Exception, match="munge_key_b64"):
        cluster_values(__ack_operator_munge_key={"content": ""})


def gres_names(text):
    return {line.split()[0].split("=", 1)[1] for line in lines(text)}


def test_k8s_gres_with_the_gres_strategy():
    files = cluster_values()["slurmConfigs"]["filesInConfigMap"]
    assert lines(files["gres.conf"]) == ["Name=k8scpu Flags=CountOnly", "Name=k8smemory Flags=CountOnly"]
    slurm = lines(files["slurm.conf"])
    assert "GresTypes=k8scpu,k8smemory" in slurm
    # ACK's plugins, not the collection's job_submit.lua (which the pods do not have).
    assert {"NodeFeaturesPlugins=node_features/k8s_resources", "JobSubmitPlugins=k8s_resource_completion"} <= set(slurm)
    assert "Gres=k8scpu:8,k8smemory:16000" in files["slurm.conf"]


def test_no_k8s_gres_without_a_gres_node():
    files = cluster_values(**VARIANTS["placeholder nodes"])["slurmConfigs"]["filesInConfigMap"]
    # Written empty, so Helm does not keep the chart's gres.conf.
    assert files["gres.conf"] == ""
    assert "k8s" not in files["slurm.conf"]
    assert "JobSubmitPlugins" not in files["slurm.conf"]


def test_gres_conf_follows_the_model_per_node():
    files = cluster_values(**VARIANTS["one gres node, a gpu"])["slurmConfigs"]["filesInConfigMap"]
    gres = lines(files["gres.conf"])
    assert "NodeName=cn001 Name=gpu File=/dev/nvidia0" in gres
    assert {"Name=k8scpu Flags=CountOnly", "Name=k8smemory Flags=CountOnly"} <= set(gres)
    assert "AuthAltParameters=jwt_key=/var/jwt/jwt_hs256.key,disable_token_creation" in lines(files["slurm.conf"])
