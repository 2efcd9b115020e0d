# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Elastic node sets and configless Slurm (module_utils/elastic.py) for slurm_common and power_save."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import HostlistError
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

elastic = LazyModule("elastic")
slurm_majors = LazyModule("slurm_majors")


def slurm_elastic_plan(nodesets, config, power_save=None, configless=None, static_records=None, controllers=None,
                       ctld_major=None):
    """A cluster's elastic plan: configless or not, the State=CLOUD node lines, slurm.conf with power saving, --conf-server.

    ``ctld_major``: the Slurm major of the cluster's first controller (slurm_common_major), which reads
    SlurmctldParameters.
    """
    nodesets = nodesets or []
    try:
        on = elastic.configless(configless, nodesets)
        return {
            "configless": on,
            "nodes": elastic.node_records(nodesets),
            "config": elastic.power_save_settings(config, nodesets, power_save, static_records, on,
                                                  slurm_majors.ctld_parameters_defunct(ctld_major)),
            "conf_server": elastic.conf_server(controllers, config),
        }
    except (HostlistError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("slurm_elastic_plan: %s (the first play of site.yml explains bad inputs)" % exc) from exc


def slurm_power_tool_config(nodesets, cluster, conf_server, munge_uid, munge_gid, settings=None):
    """The hybridhpc-power configuration of a cluster's controllers."""
    try:
        return elastic.tool_config(cluster, nodesets, conf_server, munge_uid, munge_gid, settings)
    except (HostlistError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("slurm_power_tool_config: %s" % exc) from exc


def slurm_file_entries(paths, contents, src_root, dest_root, mode="0644"):
    """slurm_config_files entries installing files read on the Ansible controller under another root.

    ``paths``: the files (under ``src_root``); ``contents``: their texts, in
    the same order (``query('ansible.builtin.file', *paths, rstrip=false)``).
    """
    paths, contents = list(paths or []), list(contents or [])
    if len(paths) != len(contents):
        raise AnsibleFilterError("slurm_file_entries: %d paths but %d contents" % (len(paths), len(contents)))
    root = str(src_root).rstrip("/") + "/"
    entries = []
    for path, content in zip(paths, contents):
        if not str(path).startswith(root):
            raise AnsibleFilterError("slurm_file_entries: %s is not under %s" % (path, root))
        entries.append({"dest": str(dest_root).rstrip("/") + "/" + str(path)[len(root):], "content": content, "mode": mode})
    return entries


class FilterModule(object):
    def filters(self):
        return {
            "slurm_elastic_plan": slurm_elastic_plan,
            "slurm_power_tool_config": slurm_power_tool_config,
            "slurm_file_entries": slurm_file_entries,
        }
