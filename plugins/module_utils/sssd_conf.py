# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Directory users through SSSD: the role sssd's inputs checked, and its sssd.conf.

Slurm runs a job as the uid the submitting host resolved, so every host of a
cluster (and of a federation) must resolve its users through one directory.
The role points SSSD at the site's LDAP servers, one domain, id and auth
provider ldap. The checks refuse what SSSD would start with and then fail
silently at the first lookup (no URI, no search base), and what would send
the bind password in clear (an ``ldap://`` URI without StartTLS).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

SCHEMAS = ("rfc2307", "rfc2307bis", "ad", "ipa")
# SSSD's domain section name, [domain/NAME]: a name that needs no quoting anywhere SSSD uses it (its cache file).
DOMAIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# One RDN at least, attribute=value (a DN's own grammar is wider; this is what a search base looks like).
DN_RE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9-]*=[^,=]+(,\s*[A-Za-z][A-Za-z0-9-]*=[^,=]+)*\s*$")
URI_RE = re.compile(r"^(ldaps?)://[^/\s]+/?$")
# Local system accounts that must never be looked up in the directory (SSSD's default filters root alone):
# a directory entry with one of these names would take over Slurm's or MUNGE's files.
LOCAL_ACCOUNTS = ("root", "slurm", "munge")
CA_PATH = "/etc/sssd/hybridhpc-ldap-ca.pem"


def problems(params):
    """Messages naming the variable and the fix; empty when the role may run (or has nothing to do)."""
    uris = params.get("uri") or []
    if isinstance(uris, str):
        return ["sssd_ldap_uri: give a list of URIs (ldaps://ldap1.example.org), not a string"]
    if not uris:
        return []
    found = []
    schemes = set()
    for uri in uris:
        match = URI_RE.match(str(uri))
        if not match:
            found.append("sssd_ldap_uri: %r is not ldap://HOST[:PORT] or ldaps://HOST[:PORT]" % (uri,))
            continue
        schemes.add(match.group(1))
    start_tls = bool(params.get("start_tls"))
    if "ldap" in schemes and not start_tls:
        found.append("sssd_ldap_uri: ldap:// without sssd_ldap_id_use_start_tls: true sends the bind password and "
                     "every lookup in clear: use ldaps:// or set sssd_ldap_id_use_start_tls: true")
    if "ldaps" in schemes and start_tls:
        found.append("sssd_ldap_id_use_start_tls: StartTLS is for ldap:// URIs; ldaps:// is TLS already: set it false")
    if not DN_RE.match(str(params.get("search_base") or "")):
        found.append("sssd_ldap_search_base: give the directory's base DN (dc=example,dc=org); %r is none"
                     % (params.get("search_base") or "",))
    if params.get("schema") not in SCHEMAS:
        found.append("sssd_ldap_schema: %r is not one of %s" % (params.get("schema"), ", ".join(SCHEMAS)))
    if not DOMAIN_RE.match(str(params.get("domain") or "")):
        found.append("sssd_domain: %r is not a name of letters, digits, '_', '.' and '-'" % (params.get("domain"),))
    if not params.get("cacert"):
        found.append("sssd_ldap_tls_cacert: give the path, on the Ansible controller, of the PEM file of the CA that "
                     "signed the LDAP servers' certificates (SSSD checks them: ldap_tls_reqcert = demand)")
    elif not params.get("cacert_exists"):
        found.append("sssd_ldap_tls_cacert: %s does not exist on the Ansible controller" % params.get("cacert"))
    bind_dn = params.get("bind_dn") or ""
    has_password = bool(params.get("bind_password_set"))
    if bind_dn and not has_password:
        found.append("sssd_ldap_bind_password: sssd_ldap_bind_dn %s is set without its password: give it (a vault "
                     "or the AWX credential 'SSSD LDAP bind'), or clear the DN to search anonymously" % bind_dn)
    if has_password and not bind_dn:
        found.append("sssd_ldap_bind_dn: a bind password is set without the DN it is for: give the DN")
    if params.get("bind_password_has_newline"):
        found.append("sssd_ldap_bind_password: holds a line break, which sssd.conf cannot carry: strip it "
                     "(a password read from a file keeps the file's last newline)")
    if bind_dn and not DN_RE.match(bind_dn):
        found.append("sssd_ldap_bind_dn: %r is not a DN (cn=sssd,ou=services,dc=example,dc=org)" % (bind_dn,))
    return found


def render(params):
    """sssd.conf for one LDAP domain (owner and group root, mode 0640: what sssd.service leaves it at each start)."""
    domain = params["domain"]
    lines = [
        "# Managed by Ansible (hybridhpc.slurm sssd role). Do not edit: changes are overwritten.",
        "[sssd]",
        "services = nss, pam",
        "domains = %s" % domain,
        "",
        "[nss]",
        # Slurm's and MUNGE's own accounts stay local whatever the directory holds.
        "filter_users = %s" % ", ".join(LOCAL_ACCOUNTS),
        "filter_groups = %s" % ", ".join(LOCAL_ACCOUNTS),
        "",
        "[pam]",
        "",
        "[domain/%s]" % domain,
        "id_provider = ldap",
        "auth_provider = ldap",
        "chpass_provider = ldap",
        "ldap_uri = %s" % ", ".join(params["uri"]),
        "ldap_search_base = %s" % params["search_base"].strip(),
        "ldap_schema = %s" % params["schema"],
        "ldap_tls_cacert = %s" % CA_PATH,
        "ldap_tls_reqcert = demand",
        "ldap_id_use_start_tls = %s" % ("true" if params.get("start_tls") else "false"),
    ]
    if params.get("bind_dn"):
        lines += [
            "ldap_default_bind_dn = %s" % params["bind_dn"],
            "ldap_default_authtok_type = password",
            "ldap_default_authtok = %s" % params["bind_password"],
        ]
    lines += [
        # A compute node lists no directory (getent passwd without a name): thousands of users would be read
        # into every node's cache for nothing.
        "enumerate = false",
        "cache_credentials = %s" % ("true" if params.get("cache_credentials") else "false"),
        "",
    ]
    return "\n".join(lines)
