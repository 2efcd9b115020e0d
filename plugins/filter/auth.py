# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which authentication a cluster runs and what it keeps accepting while it moves (module_utils/auth_plan.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

auth_plan = LazyModule("auth_plan")


def slurm_auth_plan(wanted, state=None, peers=None):
    """The cluster's AuthType, CredType, the type it still accepts, and what every host needs for both.

    peers: the other clusters' controllers' reads (a skipped read, of a controller that plans no cluster, counts
    for nothing)."""
    peers = [p for p in peers or [] if isinstance(p, dict) and not p.get("skipped") and p is not state]
    return auth_plan.plan(wanted, state or None, peers)


def slurm_auth_alt_types(auth, jwt):
    """AuthAltTypes of slurmctld and slurmdbd: the type still accepted, then auth/jwt (None when neither)."""
    return auth_plan.alt_types(auth, bool(jwt))


def slurm_auth_problems(inputs):
    """What the first play refuses in the cluster's authentication inputs.

    inputs: auth_type, key_b64, config, dbd_config, key_source_host and play_hosts (where slurm.key is made), major
    (the cluster's, may be empty), and for every
    controller of the inventory its cluster (clusters), slurm_auth_type (cluster_auth_types) and
    slurm_auth_key_b64 (cluster_keys), in the same order. With paths_missing (the host's facts step) and host, also
    TLSType where that host's Slurm lacks it."""
    inputs = inputs or {}
    clusters = {}
    for name, auth_type, key in zip(inputs.get("clusters") or [], inputs.get("cluster_auth_types") or [],
                                    inputs.get("cluster_keys") or []):
        clusters.setdefault(name, {"auth_type": auth_type, "key_b64": key})
    problems = (auth_plan.input_problems(inputs.get("auth_type"), inputs.get("key_b64"), inputs.get("config"),
                                         inputs.get("dbd_config"), inputs.get("key_source_host"),
                                         inputs.get("play_hosts"))
                + auth_plan.major_problems(inputs.get("auth_type"), inputs.get("major"))
                + auth_plan.federation_problems(clusters))
    if "paths_missing" in inputs:
        problems += auth_plan.tls_problems(inputs.get("config"), inputs.get("major"), inputs.get("paths_missing"),
                                           inputs.get("host"))
    return problems


def slurm_tls_plugin_paths(config):
    """The files one of which must exist on every Slurm host for slurm_config's TLSType ([] without TLS)."""
    return auth_plan.tls_plugin_paths(config)


class FilterModule(object):
    def filters(self):
        return {
            "slurm_auth_plan": slurm_auth_plan,
            "slurm_auth_alt_types": slurm_auth_alt_types,
            "slurm_auth_problems": slurm_auth_problems,
            "slurm_tls_plugin_paths": slurm_tls_plugin_paths,
        }
