# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm majors and supported in-place upgrades (module_utils/slurm_versions.py) for rolling_upgrade.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

slurm_versions = LazyModule("slurm_versions")


def slurm_apt_planned(stdout, packages=None):
    """{package: [installed, candidate]} from apt's simulation output (only ``packages`` when given)."""
    return {k: list(v) for k, v in slurm_versions.apt_planned(stdout, packages).items()}


def slurm_upgrade_plan_problems(hosts):
    """Why a site's pending Slurm upgrade is not supported in place (empty: it is)."""
    return slurm_versions.upgrade_plan_problems({h: {p: tuple(v) for p, v in (pk or {}).items()} for h, pk in (hosts or {}).items()})


class FilterModule(object):
    def filters(self):
        return {
            "slurm_apt_planned": slurm_apt_planned,
            "slurm_upgrade_plan_problems": slurm_upgrade_plan_problems,
        }
