# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's distro packages in one transaction (module_utils/host_packages.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

host_packages = LazyModule("host_packages")


def slurm_packages(component, facts, override=None):
    """One component's package names for this OS (the inventory's override when set)."""
    try:
        return host_packages.packages(component, facts, override)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError("slurm_packages: %s" % exc) from exc


def slurm_host_packages(host, groups, host_vars, facts, jwt, auth=None):
    """Every package a host needs for the Slurm components its groups give it (and its cluster's authentication)."""
    try:
        return host_packages.host_packages(host_packages.host_components(host, groups, host_vars, jwt, facts, auth),
                                           facts, host_vars)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError("slurm_host_packages: %s" % exc) from exc


def slurm_host_apt_sources(host, groups, host_vars, facts):
    """The apt sources and pins (dest, content) a host's one transaction needs in place before it runs."""
    return host_packages.host_apt_sources(host, groups, host_vars, facts)


def slurm_apptainer_fallback_files(facts, method, releases_without, suite, mirror):
    """The apt source and pin that take Apptainer alone from the fallback suite ([] where the release has it)."""
    return host_packages.apptainer_fallback_files(facts, method, releases_without, suite, mirror)


def slurm_login_sackd(host, groups, host_vars):
    """Whether a login host runs sackd (configless cluster, no daemon of its own): it then keeps no slurm.conf."""
    return host_packages.login_sackd(host, groups, host_vars)


def slurm_auth_sackd(host, groups, auth):
    """Where the cluster's authentication needs sackd on this host: "login", "compute" or None."""
    return host_packages.auth_sackd(host, groups or {}, auth)


def slurm_units_enabled_with_munge(host, groups):
    """The units munge's step enables beside munge in one systemctl enable (slurmd on a compute node)."""
    return host_packages.units_enabled_with_munge(host, groups or {})


def slurm_packages_covered(wanted, installed):
    """True when the host's one transaction already holds every wanted package."""
    return host_packages.covered(wanted, installed or [])


def slurm_packages_missing(dpkg_query_output, wanted):
    """The wanted packages dpkg-query (format: host_packages.DPKG_QUERY_FORMAT) does not list as installed."""
    return host_packages.missing(dpkg_query_output, wanted)


def slurm_packages_newly_installed(result, candidates):
    """The candidates the install result(s) (apt, dnf; skipped ones count for nothing) installed in this run."""
    results = result if isinstance(result, list) else [result]
    found = set()
    for one in results:
        found.update(host_packages.newly_installed(one or {}, candidates or []))
    return sorted(found)


def slurm_packages_fresh(wanted, own_install, fresh_packages):
    """Whether a role's packages were installed in this run (its own install result, or the host's transaction)."""
    return host_packages.fresh(wanted or [], own_install, fresh_packages)


class FilterModule(object):
    def filters(self):
        return {
            "slurm_packages": slurm_packages,
            "slurm_host_packages": slurm_host_packages,
            "slurm_host_apt_sources": slurm_host_apt_sources,
            "slurm_apptainer_fallback_files": slurm_apptainer_fallback_files,
            "slurm_login_sackd": slurm_login_sackd,
            "slurm_auth_sackd": slurm_auth_sackd,
            "slurm_units_enabled_with_munge": slurm_units_enabled_with_munge,
            "slurm_packages_covered": slurm_packages_covered,
            "slurm_packages_missing": slurm_packages_missing,
            "slurm_packages_newly_installed": slurm_packages_newly_installed,
            "slurm_packages_fresh": slurm_packages_fresh,
        }
