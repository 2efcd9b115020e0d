# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's users as its hosts resolve them (module_utils/user_ids.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

user_ids = LazyModule("user_ids")
cluster_plan = LazyModule("cluster_plan")


def slurm_user_id_problems(users, mine, host, must_resolve, reference=None, reference_host=None):
    """What the first play refuses: a slurm_users name unknown where its jobs run, or with another uid than elsewhere."""
    names = [u.get("name") if isinstance(u, dict) else u for u in users or []]
    names = [name for name in names if name]
    return user_ids.problems(names, mine or {}, host, cluster_plan.truthy(must_resolve), reference or {},
                             reference_host)


class FilterModule(object):
    def filters(self):
        return {"slurm_user_id_problems": slurm_user_id_problems}
