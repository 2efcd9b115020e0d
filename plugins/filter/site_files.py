# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's other files as data: the topology, the per-job /tmp, Prolog/Epilog scripts and the site's files
(module_utils/site_files.py): slurm.conf's keys for them, the files of a host, and the first play's checks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

site_files = LazyModule("site_files")
cluster_plan = LazyModule("cluster_plan")
hostlist = LazyModule("hostlist")


def slurm_site_settings(config, topology, job_tmp, scripts, major, configless, config_dir):
    """slurm.conf's keys with TopologyPlugin, the per-job /tmp plugin and PrologFlags=Contain, and the script keys."""
    return site_files.settings(config, topology or {}, job_tmp or {}, scripts or [], major,
                               cluster_plan.truthy(configless), config_dir)


def slurm_site_host_files(roles, topology, job_tmp, scripts, extra, major, configless, config_dir, local_config):
    """The files this host writes ({dest, content, mode, owner, group}), the ones it must not keep (retired, when the
    collection wrote them) and the directory of its scripts (which holds only them)."""
    everything = site_files.files(topology or {}, job_tmp or {}, scripts or [], extra or [], major,
                                  cluster_plan.truthy(configless), config_dir)
    mine = site_files.host_files(everything, major, cluster_plan.truthy(configless), roles, cluster_plan.truthy(local_config))
    root = config_dir.rstrip("/")
    # A secret file's text goes to slurm_config_files as secret_content: never logged, never diffed.
    wanted = [{"dest": "%s/%s" % (root, e["name"]), ("secret_content" if e.get("secret") else "content"): e["content"],
               "mode": e["mode"], "owner": e["owner"], "group": e["group"]} for e in mine]
    names = {e["name"] for e in mine}
    retired = ["%s/%s" % (root, name) for name in sorted(site_files.READERS) if name not in names]
    return {"files": wanted, "retired": retired, "scripts_dir": "%s/scripts" % root}


def slurm_site_files_problems(inputs):
    """What the first play refuses in slurm_topology, slurm_job_tmp, slurm_scripts and slurm_site_files.

    inputs: topology, job_tmp, scripts, site_files, config, major, configless, and nodes (the cluster's node records)."""
    inputs = dict(inputs or {})
    names = cluster_plan.record_node_names(inputs.pop("nodes", None) or [], hostlist.expand)
    return site_files.problems(dict(inputs, node_names=names, configless=cluster_plan.truthy(inputs.get("configless"))))


class FilterModule(object):
    def filters(self):
        return {
            "slurm_site_settings": slurm_site_settings,
            "slurm_site_host_files": slurm_site_host_files,
            "slurm_site_files_problems": slurm_site_files_problems,
        }
