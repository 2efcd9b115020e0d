# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
name: slurm_jwt
short_description: Sign a short-lived Slurm JSON Web Token on the Ansible controller
version_added: 0.1.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
description:
  - Signs an HS256 JSON Web Token (JWT) that Slurm's C(auth/jwt) accepts, with
    the cluster's JWT key, on the Ansible controller. Automation can then call
    slurmrestd without logging into a Slurm controller to run C(scontrol token).
  - The token is the one C(scontrol token username=USER lifespan=SECONDS)
    prints (after C(SLURM_JWT=)) - header C({"alg":"HS256","typ":"JWT"}),
    claims C(iat) (now), C(exp) (now + O(lifespan)) and C(sun) (the user name).
  - Returns one token per user name.
  - Nothing is sent anywhere; the key never leaves the Ansible controller.
options:
  _terms:
    description:
      - User names to sign tokens for, one token each. Lists are flattened.
      - When given, O(username) must not be set.
    type: list
    elements: str
    required: false
  username:
    description:
      - Slurm user name to sign a token for (the C(sun) claim), when no term is
        given.
      - A token for root or the SlurmUser may act as any user (slurmrestd
        C(X-SLURM-USER-NAME)); other users' tokens only act as themselves.
      - The user must exist on the Slurm controllers (slurmctld resolves the name
        to a UID).
    type: str
  key_file:
    description:
      - Path, on the Ansible controller, of a copy of the cluster's JWT key
        (C(AuthAltParameters=jwt_key=...), by default
        C(StateSaveLocation/jwt_hs256.key)).
      - The whole file is the key, byte for byte; it is read in binary and never
        stripped.
      - May be encrypted with ansible-vault. A relative path is looked up like the
        P(ansible.builtin.file#lookup) lookup does (the C(files/) directories of
        the role and the playbook).
      - Exactly one of O(key_file) and O(key_b64) is required.
    type: str
  key_b64:
    description:
      - The cluster's JWT key, base64-encoded (standard or URL-safe alphabet;
        whitespace is ignored), for example a vaulted variable or the C(content)
        of M(ansible.builtin.slurp) on the controller.
      - Exactly one of O(key_file) and O(key_b64) is required.
    type: str
  lifespan:
    description:
      - Seconds the token stays valid. Keep it short; sign a new token for every
        run instead of storing one.
      - C(AuthAltParameters=max_token_lifespan) only limits C(scontrol token);
        slurmctld accepts any lifespan of a token signed with its key.
    type: int
    default: 300
notes:
  - Lookups run on the Ansible controller. The key and the tokens are secrets;
    set C(no_log=true) on tasks that use them and protect the key file (for
    example with ansible-vault).
  - The Ansible controller's clock must be right; slurmctld rejects a token once
    its C(exp) claim is in the past on the Slurm controller's clock.
  - Only HS256 keys (C(jwt_key)) can sign tokens this way; sites that only trust
    an external identity provider (C(jwks=)) cannot use this lookup.
seealso:
  - module: hybridhpc.slurm.slurm_token
    description: Mint a token with C(scontrol token) on a Slurm controller instead.
  - name: Slurm JWT authentication
    description: How Slurm signs and checks JSON Web Tokens.
    link: https://slurm.schedmd.com/jwt.html
"""

EXAMPLES = r"""
- name: Ask slurmrestd who is there, with a token signed on the Ansible controller
  ansible.builtin.uri:
    url: "http://{{ slurmrestd_host }}:6820/slurm/v0.0.42/nodes"
    headers:
      X-SLURM-USER-NAME: root
      X-SLURM-USER-TOKEN: "{{ lookup('hybridhpc.slurm.slurm_jwt', username='root', key_file='secrets/jwt_hs256.key', lifespan=120) }}"
  no_log: true

- name: Keep a token for the tasks of this play (vaulted key in a variable)
  ansible.builtin.set_fact:
    slurm_token: "{{ lookup('hybridhpc.slurm.slurm_jwt', username='slurm', key_b64=slurmrestd_jwt_key_b64) }}"
  no_log: true

- name: One token per user
  ansible.builtin.set_fact:
    user_tokens: "{{ dict(users | zip(query('hybridhpc.slurm.slurm_jwt', users, key_file='/etc/ansible/slurm/jwt_hs256.key'))) }}"
  vars:
    users: [alice, bob]
  no_log: true
"""

RETURN = r"""
_raw:
  description:
    - One signed token (a JWT, three base64url parts joined by dots) per user
      name, valid for O(lifespan) seconds from now.
  type: list
  elements: str
  sample:
    - eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjE3MDAwMDAzMDAsImlhdCI6MTcwMDAwMDAwMCwic3VuIjoicm9vdCJ9.c2lnbmF0dXJl
"""

# Imports follow the documentation (ansible-test validate-modules rule), hence E402.
import base64
import binascii
import os

from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.plugins.lookup import LookupBase

from ansible_collections.hybridhpc.slurm.plugins.module_utils.jwt import sign_hs256_token


def decode_key_b64(value):
    """Bytes of a base64 key (standard or URL-safe alphabet, whitespace ignored)."""
    text = "".join(to_text(value).split())
    if not text:
        raise ValueError("key_b64 is empty")
    padded = text + "=" * (-len(text) % 4)
    alphabet = {"altchars": b"-_"} if ("-" in text or "_" in text) else {}
    try:
        key = base64.b64decode(padded, validate=True, **alphabet)
    except (binascii.Error, ValueError) as err:
        raise ValueError("key_b64 is not valid base64: %s" % err) from err
    if not key:
        raise ValueError("key_b64 decodes to an empty key")
    return key


def _flatten(terms):
    for term in terms:
        if isinstance(term, (list, tuple)):
            yield from _flatten(term)
        elif term is not None:
            yield term


class LookupModule(LookupBase):

    def _read_key_file(self, key_file, variables):
        path = os.path.expanduser(key_file)
        if not os.path.isabs(path):
            found = self.find_file_in_search_path(variables or {}, "files", path, ignore_missing=True)
            if not found:
                raise AnsibleLookupError("slurm_jwt: key_file %s was not found in the files search path" % key_file)
            path = found
        try:
            real_path = self._loader.get_real_file(path, decrypt=True)
        except AnsibleError as err:
            raise AnsibleLookupError("slurm_jwt: cannot read key_file %s: %s" % (key_file, to_native(err))) from err
        try:
            with open(real_path, "rb") as handle:
                key = handle.read()
        except OSError as err:
            raise AnsibleLookupError("slurm_jwt: cannot read key_file %s: %s" % (key_file, to_native(err))) from err
        finally:
            self._loader.cleanup_tmp_file(real_path)
        if not key:
            raise AnsibleLookupError("slurm_jwt: key_file %s is empty" % key_file)
        return key

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        username = self.get_option("username")
        key_file = self.get_option("key_file")
        key_b64 = self.get_option("key_b64")
        lifespan = self.get_option("lifespan")

        users = [to_text(t) for t in _flatten(terms or [])]
        if users and username:
            raise AnsibleLookupError("slurm_jwt: give user names either as terms or as username, not both")
        if not users:
            if not username:
                raise AnsibleLookupError("slurm_jwt: a user name is required (username=NAME, or as a term)")
            users = [username]
        if bool(key_file) == bool(key_b64):
            raise AnsibleLookupError("slurm_jwt: exactly one of key_file and key_b64 is required")

        if key_file:
            key = self._read_key_file(key_file, variables)
        else:
            try:
                key = decode_key_b64(key_b64)
            except ValueError as err:
                raise AnsibleLookupError("slurm_jwt: %s" % err) from err

        tokens = []
        for user in users:
            try:
                tokens.append(sign_hs256_token(key, user, lifespan))
            except (TypeError, ValueError) as err:
                raise AnsibleLookupError("slurm_jwt: cannot sign a token for %r: %s" % (user, err)) from err
        return tokens
