# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's Slurm major and what the collection knows of it (module_utils/slurm_majors.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

slurm_majors = LazyModule("slurm_majors")


def slurm_host_major(apt_policy_text, slurm_version=None, release=None, installed=None):
    """The host's Slurm major (from slurm_version, the installed or candidate package, the Debian release) and its data."""
    try:
        return slurm_majors.major_facts(slurm_version, apt_policy_text, release, installed)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def slurm_rest_openapi_plugins(major, accounting):
    """slurmrestd's -s value for this major and whether the cluster has accounting ("" loads every plugin)."""
    return slurm_majors.rest_openapi_plugins(major, accounting)


class FilterModule(object):
    def filters(self):
        return {"slurm_host_major": slurm_host_major, "slurm_rest_openapi_plugins": slurm_rest_openapi_plugins}
