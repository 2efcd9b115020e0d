# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's health checks: node_health_checks judged by hybridhpc-health's own rules
(roles/node_health/files/hybridhpc_health/.../config.py), and the checks its slurm.conf
line and gres.conf imply (module_utils/health_derived.py).

The program's config module is standard library only and has no import of
its package, so it is loaded from the role's files by path: the first play
and the program then refuse exactly the same checks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import sys

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

health_derived = LazyModule("health_derived")

_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles", "node_health", "files", "hybridhpc_health",
                       "src", "hybridhpc_health", "config.py")
_module = None


def _config():
    global _module
    if _module is None:
        spec = importlib.util.spec_from_file_location("hybridhpc_health_config", _CONFIG)
        if spec is None or spec.loader is None:
            raise AnsibleFilterError("slurm_health_check_problems: %s is missing" % _CONFIG)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        _module = module
    return _module


def slurm_health_check_problems(checks, node="node"):
    """The problems hybridhpc-health would find in a node's checks, each starting with node_health_checks."""
    if not checks:
        return []
    return ["node_health_checks%s" % p[len("checks"):] if p.startswith("checks") else "node_health_checks: " + p
            for p in _config().validate({"node": node, "checks": checks})]


def slurm_node_health_checks(checks, node, nodes, gres, derive=True, gpu_command=None):
    """This node's checks: the inventory's, then those its slurm.conf line and gres.conf imply (when derive)."""
    return health_derived.node_checks(checks, node, nodes, gres, derive=derive, gpu_command=gpu_command)


class FilterModule(object):
    def filters(self):
        return {"slurm_health_check_problems": slurm_health_check_problems, "slurm_node_health_checks": slurm_node_health_checks}
