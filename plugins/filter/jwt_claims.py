# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a JWT's claims without its key (to see when a stored token expires)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.module_utils.jwt import JWTError, decode_token_unverified


def jwt_claims(token):
    try:
        return decode_token_unverified(token)
    except (JWTError, ValueError) as exc:
        raise AnsibleFilterError("jwt_claims: not a JWT (%s)" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"jwt_claims": jwt_claims}
