# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm hostlist filters: hostlist_expand and hostlist_compress.

Both give exactly what Slurm 24.11's scontrol prints (``show hostnames``,
``show hostlist``, ``show hostlistsorted``); see module_utils/hostlist.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import (
    HostlistError,
    compress,
    expand,
)


def hostlist_expand(value):
    """Host names of a Slurm hostlist expression (or a list of them)."""
    try:
        return expand(value)
    except HostlistError as exc:
        raise AnsibleFilterError("hostlist_expand: %s" % exc) from exc


def hostlist_compress(value, sort=False):
    """Slurm hostlist expression for host names; sort=true sorts like hostlistsorted."""
    try:
        sort = boolean(sort, strict=True)
    except TypeError as exc:
        raise AnsibleFilterError("hostlist_compress: sort must be a boolean, got %r" % (sort,)) from exc
    try:
        return compress(value, sort=sort)
    except HostlistError as exc:
        raise AnsibleFilterError("hostlist_compress: %s" % exc) from exc


class FilterModule(object):
    """Slurm hostlist filters."""

    def filters(self):
        return {
            "hostlist_expand": hostlist_expand,
            "hostlist_compress": hostlist_compress,
        }
