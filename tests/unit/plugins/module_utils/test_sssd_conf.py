# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sssd_conf: the role sssd's checks (first play) and its sssd.conf."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import configparser

import pytest

from ansible_collections.hybridhpc.slurm.plugins.filter.sssd import sssd_config, sssd_problems

GOOD = {
    "uri": ["ldaps://ldap1.example.org", "ldaps://ldap2.example.org:636"],
    "search_base": "dc=example,dc=org",
    "schema": "rfc2307",
    "start_tls": False,
    "cacert": "/srv/ca.pem",
    "cacert_exists": True,
    "bind_dn": "cn=sssd,ou=services,dc=example,dc=org",
    "bind_password": "s3cret",
    "domain": "example",
    "cache_credentials": False,
}


def with_(**changes):
    return dict(GOOD, **changes)


def test_a_good_directory_and_no_directory_pass():
    assert sssd_problems(GOOD) == []
    assert sssd_problems(with_(uri=[])) == []
    assert sssd_problems(with_(uri=["ldap://ldap1"], start_tls=True)) == []
    assert sssd_problems(with_(bind_dn="", bind_password="")) == []


@pytest.mark.parametrize("changes, variable, words", [
    ({"uri": "ldaps://ldap1"}, "sssd_ldap_uri", "a list"),
    ({"uri": ["ldap1.example.org"]}, "sssd_ldap_uri", "is not ldap://"),
    ({"uri": ["ldaps://ldap1/dc=x"]}, "sssd_ldap_uri", "is not ldap://"),
    ({"uri": ["ldap://ldap1"]}, "sssd_ldap_uri", "in clear"),
    ({"start_tls": True}, "sssd_ldap_id_use_start_tls", "TLS already"),
    ({"search_base": ""}, "sssd_ldap_search_base", "base DN"),
    ({"search_base": "example.org"}, "sssd_ldap_search_base", "base DN"),
    ({"schema": "nis"}, "sssd_ldap_schema", "not one of"),
    ({"domain": "my domain"}, "sssd_domain", "not a name"),
    ({"cacert": ""}, "sssd_ldap_tls_cacert", "PEM file of the CA"),
    ({"cacert_exists": False}, "sssd_ldap_tls_cacert", "does not exist"),
    ({"bind_password": ""}, "sssd_ldap_bind_password", "without its password"),
    ({"bind_dn": ""}, "sssd_ldap_bind_dn", "without the DN"),
    ({"bind_dn": "sssd"}, "sssd_ldap_bind_dn", "is not a DN"),
    ({"bind_password": "s3cret\n"}, "sssd_ldap_bind_password", "line break"),
])
def test_each_bad_input_is_named_with_its_fix(changes, variable, words):
    found = sssd_problems(with_(**changes))
    assert len(found) == 1, found
    assert found[0].startswith(variable + ":") and words in found[0]


def test_a_problem_never_shows_the_password():
    found = sssd_problems(with_(bind_dn="", bind_password="s3cret"))
    assert found and not any("s3cret" in text for text in found)


def parse(text):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return parser


def test_the_config_one_domain_checked_tls_and_the_local_accounts_filtered():
    conf = parse(sssd_config(GOOD))
    assert conf["sssd"]["domains"] == "example" and conf["sssd"]["services"] == "nss, pam"
    domain = conf["domain/example"]
    assert domain["id_provider"] == "ldap" and domain["auth_provider"] == "ldap"
    assert domain["ldap_uri"] == "ldaps://ldap1.example.org, ldaps://ldap2.example.org:636"
    assert domain["ldap_tls_reqcert"] == "demand"
    assert domain["ldap_tls_cacert"] == "/etc/sssd/hybridhpc-ldap-ca.pem"
    assert domain["ldap_default_bind_dn"] == GOOD["bind_dn"] and domain["ldap_default_authtok"] == "s3cret"
    assert domain["enumerate"] == "false" and domain["ldap_id_use_start_tls"] == "false"
    assert {"root", "slurm", "munge"} <= {name.strip() for name in conf["nss"]["filter_users"].split(",")}


def test_an_anonymous_directory_has_no_bind_lines():
    domain = parse(sssd_config(with_(bind_dn="", bind_password="")))["domain/example"]
    assert "ldap_default_bind_dn" not in domain and "ldap_default_authtok" not in domain
