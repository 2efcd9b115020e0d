# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared filesystems: the role shared_filesystems's checks, mounts and drop-ins (module_utils/shared_filesystems.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

shared_filesystems = LazyModule("shared_filesystems")


def shared_filesystems_problems(entries, host):
    """What the first play refuses of a host's shared_filesystems_mounts (host: host, is_controller, state_save_location)."""
    return shared_filesystems.problems(entries, host or {})


def shared_filesystems_cluster_problems(controller_entries, cluster):
    """An HA pair whose controllers would not share one StateSaveLocation."""
    return shared_filesystems.cluster_problems(controller_entries or {}, cluster)


def shared_filesystems_host_problems(entries, read, services=None):
    """A mount that would hide slurmctld's saved state, from the host's read (shared_filesystems_state)."""
    return shared_filesystems.host_problems(entries, read or {}, services or {})


def shared_filesystems_mounts(entries):
    """The entries with their defaults, for ansible.posix.mount."""
    return shared_filesystems.mounts(entries)


def shared_filesystems_dropins(entries, units_here):
    """Each Slurm daemon's drop-in text (RequiresMountsFor=), or None where it needs none."""
    return shared_filesystems.dropins(entries, units_here or [])


class FilterModule(object):
    def filters(self):
        return {
            "shared_filesystems_problems": shared_filesystems_problems,
            "shared_filesystems_cluster_problems": shared_filesystems_cluster_problems,
            "shared_filesystems_host_problems": shared_filesystems_host_problems,
            "shared_filesystems_mounts": shared_filesystems_mounts,
            "shared_filesystems_dropins": shared_filesystems_dropins,
        }
