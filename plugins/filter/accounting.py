# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Accounts, users and QoS as code (module_utils/accounting.py) for slurm_common and slurm_accounting."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

accounting = LazyModule("accounting")


def slurm_accounting_policy(enabled, enforce=None, priority=None, managed=False):
    """slurm.conf keys of the accounting policy: AccountingStorageEnforce and the multifactor priority."""
    return accounting.policy_config(enabled, enforce, priority, managed)


def slurm_accounting_plan(host, groups, hostvars, qos=None, accounts=None, users=None, default_qos=None):
    """The slurm_qos/slurm_account/slurm_user calls for the accounting database whose first slurmdbd host is ``host``."""
    def host_vars(h):
        return hostvars[h] if h in hostvars else {}

    try:
        clusters = accounting.serving_clusters(host, groups, host_vars)
        # The copilot's Slurm user, where its placeholder jobs need an association.
        managed = bool(qos or accounts or users)
        users = list(users or []) + accounting.copilot_users(clusters, groups, host_vars, users, managed=managed)
        return accounting.accounting_plan(clusters, qos, accounts, users, default_qos)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("slurm_accounting_plan: %s (the first play of site.yml explains bad inputs)" % exc) from exc


def slurm_accounting_purge(current, plan):
    """What an opt-in purge removes from the database: users, accounts (children first) and QoS the plan does not list."""
    try:
        return accounting.purge_plan(current, plan)
    except (AttributeError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("slurm_accounting_purge: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {
            "slurm_accounting_policy": slurm_accounting_policy,
            "slurm_accounting_plan": slurm_accounting_plan,
            "slurm_accounting_purge": slurm_accounting_purge,
        }
