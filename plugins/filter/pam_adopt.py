# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for pam_slurm_adopt's slurm.conf needs (module_utils/pam_adopt.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

pam_adopt = LazyModule("pam_adopt")


def slurm_prolog_contain(config, enabled=True):
    """The slurm.conf mapping with Contain added to the PrologFlags it has (when enabled)."""
    return pam_adopt.with_contain(config, enabled)


def slurm_prolog_flags(config):
    """The PrologFlags of a slurm.conf mapping, as a list."""
    return pam_adopt.prolog_flags(config)


class FilterModule(object):
    def filters(self):
        return {"slurm_prolog_contain": slurm_prolog_contain, "slurm_prolog_flags": slurm_prolog_flags}
