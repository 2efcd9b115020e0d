# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The copilot's Kubernetes permissions as manifests (module_utils/copilot_rbac.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

copilot_rbac = LazyModule("copilot_rbac")


def copilot_rbac_manifests(service_account, namespace, token=None):
    """The namespace, ServiceAccount, ClusterRole, bindings (and the token Secret's Role) the copilot runs with."""
    return copilot_rbac.manifests(service_account, namespace, token or {})


def copilot_rbac_problems(service_account, namespace):
    """What is wrong with the ServiceAccount's names, naming the variable."""
    return copilot_rbac.problems(service_account, namespace)


class FilterModule(object):
    def filters(self):
        return {
            "copilot_rbac_manifests": copilot_rbac_manifests,
            "copilot_rbac_problems": copilot_rbac_problems,
        }
