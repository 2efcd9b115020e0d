# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values of ACK's ack-slurm-cluster chart, from the one Slurm model.

Every key written here is one ACK's documentation names ("Colocated scheduling
for Slurm HPC and Kubernetes": "Resources and parameters" and "Step 3:
Configure Slurm"); the chart itself never ran here, so nothing is taken from
its values.yaml. tests/unit/test_ack_chart_values.py holds the documented keys and
fails on any other.

Helm merges these values over the chart's own: a key the chart sets by
default and this cluster must not have (no slurmdbd without accounting) is
written as null, which is how Helm removes a default.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii

from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_conf

# Where ACK's walkthrough mounts the JWT key in the slurmctld, slurmdbd and
# slurmrestd pods ("Step 3": mountPath /var/jwt, jwt_key=/var/jwt/jwt_hs256.key).
JWT_MOUNT_DIR = "/var/jwt"
JWT_KEY_NAME = "jwt_hs256.key"
JWT_KEY_PATH = JWT_MOUNT_DIR + "/" + JWT_KEY_NAME
JWT_VOLUME = "config-jwt"
# "Log path. Must match the path used for verification" (Step 3, slurmdbd.conf).
DBD_LOG_FILE = "/var/log/slurmdbd.log"
# ACK's Slurm plugins for Kubernetes' GRES (Step 3's slurm.conf).
K8S_NODE_FEATURES = "node_features/k8s_resources"
K8S_JOB_SUBMIT = "k8s_resource_completion"


class AckValuesError(ValueError):
    """The chart values cannot be rendered; the message names the variable and the fix."""


def pod_jwt_mount(secret_name):
    """volumes and volumeMounts of a pod config: the JWT key at JWT_KEY_PATH.

    ACK's walkthrough mounts a ConfigMap; the key signs every token of the
    cluster, so it comes from a Secret here (same mount path, same mode).
    """
    return {
        "volumes": [{"name": JWT_VOLUME, "secret": {"secretName": secret_name, "defaultMode": 0o444}}],
        "volumeMounts": [{"name": JWT_VOLUME, "mountPath": JWT_MOUNT_DIR, "readOnly": True}],
    }


def _get(settings, key):
    return {k.lower(): v for k, v in (settings or {}).items()}.get(key.lower())


def pod_auth_alt_parameters(value):
    """AuthAltParameters with jwt_key= at the key mounted in the pods.

    >>> pod_auth_alt_parameters("jwt_key=/etc/slurm/jwt_hs256.key,disable_token_creation")
    'jwt_key=/var/jwt/jwt_hs256.key,disable_token_creation'
    """
    parts = [p for p in str(value or "").split(",") if p and not p.startswith("jwt_key=")]
    return ",".join(["jwt_key=" + JWT_KEY_PATH] + parts)


def job_submit_plugins(value):
    """The model's plugins with ACK's k8s_resource_completion for the collection's lua.

    >>> job_submit_plugins("lua")
    ['k8s_resource_completion']
    """
    plugins = value if isinstance(value, (list, tuple)) else [p for p in str(value or "").split(",") if p]
    return [K8S_JOB_SUBMIT if p == "lua" else p for p in plugins] or [K8S_JOB_SUBMIT]


def has_k8s_gres(gres):
    """True when the cluster's gres.conf records hold Kubernetes' count-only GRES."""
    return any(str(_get(r, "Name")) in slurm_conf.K8S_GRES for r in gres or [] if isinstance(r, dict))


def slurm_conf_settings(config, cluster_name, accounting, dbd_port, k8s_gres):
    """slurm.conf keys of the model, as the pods need them.

    The JWT key is where the pods mount it, and accounting goes to the
    ``${cluster}-slurmdbd`` Service the chart creates ("Enter
    ${slurmClusterName}-slurmdbd", Step 3), not to an inventory host. With
    Kubernetes' GRES, ACK's plugins replace the collection's job_submit.lua
    (which is not in the pods): node_features/k8s_resources keeps a node
    whose GRES the copilot changed from going INVAL, k8s_resource_completion
    fills in the GRES of every job (Step 3's slurm.conf, "Build a generic
    Slurm image").
    """
    pod = {"AuthAltParameters": pod_auth_alt_parameters(_get(config, "AuthAltParameters")),
           "AuthAltTypes": "auth/jwt"}
    if accounting:
        pod.update({"AccountingStorageType": "accounting_storage/slurmdbd",
                    "AccountingStorageHost": "%s-slurmdbd" % cluster_name,
                    "AccountingStoragePort": dbd_port})
    if k8s_gres:
        pod.update({"NodeFeaturesPlugins": K8S_NODE_FEATURES,
                    "JobSubmitPlugins": job_submit_plugins(_get(config, "JobSubmitPlugins"))})
    return slurm_conf.merge(config, pod)


def slurmdbd_conf_settings(dbd):
    """slurmdbd.conf keys from the slurmdbd role's accounting variables.

    ``dbd``: port, storage_host, storage_port, storage_user, storage_loc,
    storage_pass, config (slurmdbd_config, merged over the rest). The base is
    ACK's Step 3 slurmdbd.conf; the password goes last so slurmdbd_config
    cannot blank it.
    """
    if not dbd.get("storage_pass"):
        raise AckValuesError(
            "slurmdbd_storage_pass: ACK's slurmdbd pod needs the database password in slurmdbd.conf; "
            "set it (vaulted) or turn accounting off (slurm_accounting: false)"
        )
    base = {
        "AuthType": "auth/munge",
        "AuthAltTypes": "auth/jwt",
        "AuthAltParameters": "jwt_key=" + JWT_KEY_PATH,
        "SlurmUser": "slurm",
        "LogFile": DBD_LOG_FILE,
        "DbdPort": dbd.get("port"),
        "StorageType": "accounting_storage/mysql",
        "StorageHost": dbd.get("storage_host"),
        "StoragePort": dbd.get("storage_port"),
        "StorageUser": dbd.get("storage_user"),
        "StorageLoc": dbd.get("storage_loc"),
    }
    return slurm_conf.merge(slurm_conf.merge(base, dbd.get("config")), {"StoragePass": dbd["storage_pass"]})


def _conf_text(lines):
    return "\n".join(lines) + ("\n" if lines else "")


def munge_content(key_b64):
    """The MUNGE key, base64, as mungeConfigs.content; never empty.

    The chart puts it in the Secret it creates ("munge.key"=content); a
    Secret's data is base64, and a key made by mungekey is binary.
    """
    try:
        key = base64.b64decode(str(key_b64 or ""), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise AckValuesError(
            "munge_key_b64: no MUNGE key for ACK's munge Secret; set munge_key_b64 (base64 -w0 munge.key) "
            "or let the munge role create the key on the first controller (site.yml) before ack.yml"
        )
    return base64.b64encode(key).decode("ascii")


def cluster_values(model, compress=None):
    """ack-slurm-cluster values of one cluster.

    ``model``: cluster_name, operator_namespace, jwt_key_secret (the Secret
    holding the JWT key as jwt_hs256.key), config (slurm_common_config),
    nodes, partitions, gres (the cluster's gres.conf records: the k8s GRES
    only where the model has them), accounting, dbd (see
    slurmdbd_conf_settings), munge_key_b64.
    """
    name = model["cluster_name"]
    accounting = bool(model.get("accounting"))
    dbd = model.get("dbd") or {}
    pod = pod_jwt_mount(model["jwt_key_secret"])
    settings = slurm_conf_settings(model.get("config"), name, accounting, dbd.get("port"), has_k8s_gres(model.get("gres")))
    files = {
        "slurm.conf": slurm_conf.render_slurm_conf(settings, model.get("nodes"), model.get("partitions"),
                                                   compress=compress),
        # Always written: Helm would otherwise keep the chart's own gres.conf.
        "gres.conf": _conf_text(slurm_conf.render_gres(model.get("gres"), compress)),
        "slurmdbd.conf": (_conf_text(slurm_conf.render_settings(slurmdbd_conf_settings(dbd), "slurmdbd_config"))
                          if accounting else None),
    }
    return {
        "clusterName": name,
        "slurmOperatorNamespace": model["operator_namespace"],
        "headNodeConfig": dict(pod),
        "slurmdbdConfigs": dict(pod) if accounting else None,
        # The copilot speaks to Slurm through slurmrestd: always there.
        "slurmrestdConfigs": dict(pod),
        "slurmConfigs": {"createConfigsByConfigMap": True, "filesInConfigMap": files},
        "mungeConfigs": {"createConfigsBySecret": True, "content": munge_content(model.get("munge_key_b64"))},
    }
