# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_jwt lookup (signs Slurm tokens on the controller)."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import base64
import time

import pytest
import yaml
from ansible import constants as C
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import VaultLib, VaultSecret

from ansible_collections.hybridhpc.slurm.plugins.lookup import slurm_jwt
from ansible_collections.hybridhpc.slurm.plugins.module_utils import jwt

KEY = bytes(range(256))[:48]  # every kind of byte, newline and NUL included
LOAD_NAME = "hybridhpc.slurm.slurm_jwt"


@pytest.fixture
def lookup():
    """The lookup as Ansible's plugin loader would set it up."""
    C.config.initialize_plugin_configuration_definitions(
        "lookup", LOAD_NAME, yaml.safe_load(slurm_jwt.DOCUMENTATION)["options"])
    loader = DataLoader()
    plugin = slurm_jwt.LookupModule(loader=loader)
    plugin._load_name = LOAD_NAME
    return plugin


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "jwt_hs256.key"
    path.write_bytes(KEY)
    return path


def claims_of(token, key=KEY):
    return jwt.decode_hs256_token(token, key)


def test_signs_with_key_file(lookup, key_file):
    before = int(time.time())
    [token] = lookup.run([], {}, username="root", key_file=str(key_file), lifespan=120)
    claims = claims_of(token)
    assert claims["sun"] == "root"
    assert claims["exp"] - claims["iat"] == 120
    assert before <= claims["iat"] <= int(time.time())


def test_default_lifespan_is_five_minutes(lookup, key_file):
    [token] = lookup.run([], {}, username="slurm", key_file=str(key_file))
    claims = claims_of(token)
    assert claims["exp"] - claims["iat"] == 300


def test_key_file_bytes_are_not_stripped(lookup, tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"secret-key\n")
    [token] = lookup.run([], {}, username="root", key_file=str(path))
    assert claims_of(token, b"secret-key\n")["sun"] == "root"
    with pytest.raises(jwt.InvalidSignature):
        claims_of(token, b"secret-key")


@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_signs_with_key_b64(lookup, encode):
    text = encode(KEY).decode()
    wrapped = "\n".join(text[i:i + 20] for i in range(0, len(text), 20)) + "\n"
    [token] = lookup.run([], {}, username="root", key_b64=wrapped)
    assert claims_of(token)["sun"] == "root"


def test_terms_are_user_names(lookup, key_file):
    tokens = lookup.run(["alice", ["bob", "carol"]], {}, key_file=str(key_file))
    assert [claims_of(t)["sun"] for t in tokens] == ["alice", "bob", "carol"]


def test_relative_key_file_is_found_in_files_search_path(lookup, tmp_path):
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "jwt.key").write_bytes(KEY)
    variables = {"ansible_search_path": [str(tmp_path)]}
    [token] = lookup.run([], variables, username="root", key_file="jwt.key")
    assert claims_of(token)["sun"] == "root"


def test_vaulted_key_file(lookup, tmp_path):
    secret = VaultSecret(b"vault-password")
    vault = VaultLib([("default", secret)])
    path = tmp_path / "jwt.key.vault"
    path.write_bytes(vault.encrypt(KEY, secret))
    lookup._loader.set_vault_secrets([("default", secret)])
    [token] = lookup.run([], {}, username="root", key_file=str(path))
    assert claims_of(token)["sun"] == "root"


@pytest.mark.parametrize("terms, kwargs, message", [
    ([], {"key_b64": "a2V5"}, "a user name is required"),
    (["alice"], {"username": "bob", "key_b64": "a2V5"}, "either as terms or as username"),
    ([], {"username": "root"}, "exactly one of key_file and key_b64"),
    ([], {"username": "root", "key_b64": "a2V5", "key_file": "/x"}, "exactly one of key_file and key_b64"),
    ([], {"username": "root", "key_b64": "not base64!"}, "not valid base64"),
    ([], {"username": "root", "key_b64": "  \n"}, "key_b64 is empty"),
    ([], {"username": "root", "key_b64": "a2V5", "lifespan": 0}, "lifespan must be between"),
    ([], {"username": "root", "key_file": "/nonexistent/jwt.key"}, "cannot read key_file /nonexistent/jwt.key"),
    ([], {"username": "root", "key_file": "missing.key"}, "was not found in the files search path"),
])
def test_errors(lookup, terms, kwargs, message):
    with pytest.raises(AnsibleLookupError, match=message):
        lookup.run(terms, {"ansible_search_path": ["/nonexistent"]}, **kwargs)


def test_empty_key_file(lookup, tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with pytest.raises(AnsibleLookupError, match="is empty"):
        lookup.run([], {}, username="root", key_file=str(path))


def test_decode_key_b64():
    assert slurm_jwt.decode_key_b64("a2V5") == b"key"
    assert slurm_jwt.decode_key_b64("a2V5\n") == b"key"
    assert slurm_jwt.decode_key_b64(base64.urlsafe_b64encode(b"\xfb\xff").decode()) == b"\xfb\xff"
    with pytest.raises(ValueError):
        slurm_jwt.decode_key_b64("")
