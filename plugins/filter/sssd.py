# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Directory users through SSSD: the role sssd's checks and its sssd.conf (module_utils/sssd_conf.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

sssd_conf = LazyModule("sssd_conf")


def _params(settings):
    settings = dict(settings or {})
    password = settings.get("bind_password") or ""
    settings["bind_password_set"] = len(password) > 0
    settings["bind_password_has_newline"] = "\n" in password or "\r" in password
    return settings


def sssd_problems(settings):
    """What the first play refuses of the role's variables (a dict: uri, search_base, schema, domain, cacert,
    cacert_exists, start_tls, bind_dn, bind_password)."""
    return sssd_conf.problems(_params(settings))


def sssd_config(settings):
    """The text of sssd.conf for those variables."""
    return sssd_conf.render(_params(settings))


def sssd_ca_path(_settings=None):
    """Where the role installs the LDAP servers' CA on each host (the path sssd.conf names)."""
    return sssd_conf.CA_PATH


class FilterModule(object):
    def filters(self):
        return {"sssd_problems": sssd_problems, "sssd_config": sssd_config, "sssd_ca_path": sssd_ca_path}
