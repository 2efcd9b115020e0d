#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_token
short_description: Mint a Slurm JSON Web Token with scontrol token
description:
  - Runs C(scontrol token) on the target host (a Slurm controller, or any host
    whose C(scontrol) reaches slurmctld with a working MUNGE setup) and returns
    the JSON Web Token (JWT) it prints, for calling slurmrestd.
  - Also returns when the token expires, read from its C(exp) claim (the token
    is decoded without checking its signature; the key is not needed).
  - Every run mints a new token. A token is a short-lived credential, not state
    on the host, so the module always reports C(changed=false).
  - B(The task must set) C(no_log=true). The token is returned in clear so that
    it can be registered, and Ansible would otherwise print and log it.
version_added: 0.1.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  username:
    description:
      - Slurm user to mint the token for (C(scontrol token username=NAME)).
      - Only root and the SlurmUser may mint tokens for other users; any other
        user only gets tokens for itself.
      - By default the token is for the user the module runs as.
    type: str
  lifespan:
    description:
      - Seconds the token stays valid (C(scontrol token lifespan=SECONDS)).
      - By default Slurm chooses, 1800 seconds unless
        C(AuthAltParameters=max_token_lifespan) is lower.
      - Users other than the SlurmUser cannot ask for more than
        C(max_token_lifespan).
    type: int
  scontrol_path:
    description:
      - Path of the C(scontrol) executable.
      - By default C(scontrol) is looked up in E(PATH) and the usual system
        directories; the module fails when it is not installed.
    type: path
  slurm_conf:
    description:
      - Path of the C(slurm.conf) C(scontrol) reads to find slurmctld, passed as
        the E(SLURM_CONF) environment variable.
      - By default C(scontrol) uses its built-in location, an inherited
        E(SLURM_CONF), or configless mode.
    type: path
attributes:
  check_mode:
    support: full
    details:
      - The token is minted in check mode too. That creates nothing on the host,
        and the tasks that use the token need it in check mode as well.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - C(scontrol) (Debian package C(slurm-client)) on the target host, able to
    reach slurmctld.
  - JWT authentication enabled in Slurm (C(AuthAltTypes=auth/jwt) and a
    C(jwt_key) in C(AuthAltParameters), slurmctld restarted).
notes:
  - C(AuthAltParameters=disable_token_creation) lets only root and the SlurmUser
    run C(scontrol token); the module then fails for other users with a message
    saying so.
  - To mint tokens without a Slurm controller, sign them on the Ansible
    controller with the P(hybridhpc.slurm.slurm_jwt#lookup) lookup.
seealso:
  - plugin: hybridhpc.slurm.slurm_jwt
    plugin_type: lookup
    description: Sign a token on the Ansible controller with a copy of the JWT key.
  - name: Slurm JWT authentication
    description: Setting up auth/jwt and scontrol token.
    link: https://slurm.schedmd.com/jwt.html
  - name: scontrol token
    description: The scontrol command this module runs.
    link: https://slurm.schedmd.com/scontrol.html#OPT_token
"""

EXAMPLES = r"""
- name: Mint a token for root, valid five minutes
  hybridhpc.slurm.slurm_token:
    username: root
    lifespan: 300
  register: slurm_jwt
  no_log: true
  delegate_to: "{{ groups['slurmctld'][0] }}"

- name: Use it with slurmrestd
  ansible.builtin.uri:
    url: "http://{{ groups['slurmctld'][0] }}:6820/slurm/v0.0.42/ping"
    headers:
      X-SLURM-USER-NAME: "{{ slurm_jwt.username }}"
      X-SLURM-USER-TOKEN: "{{ slurm_jwt.token }}"
  no_log: true

- name: A token for the user the task runs as, with Slurm's default lifespan
  hybridhpc.slurm.slurm_token:
    slurm_conf: /etc/slurm/slurm.conf
  register: my_token
  no_log: true
"""

RETURN = r"""
token:
  description:
    - The JSON Web Token, as printed by C(scontrol token) after C(SLURM_JWT=).
      Send it as C(X-SLURM-USER-TOKEN), or export it as E(SLURM_JWT).
    - A secret; the task must set C(no_log=true).
  returned: success
  type: str
  sample: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjE3MDAwMDAzMDAsImlhdCI6MTcwMDAwMDAwMCwic3VuIjoicm9vdCJ9.c2lnbmF0dXJl
username:
  description: The user the token authenticates (its C(sun) claim).
  returned: success
  type: str
  sample: root
lifespan:
  description: Seconds the token is valid, from issue to expiry (C(exp) - C(iat)).
  returned: success
  type: int
  sample: 300
issued_at:
  description: When the token was issued, in seconds since the epoch (its C(iat) claim).
  returned: success
  type: int
  sample: 1700000000
expires_at:
  description: When the token expires, in seconds since the epoch (its C(exp) claim).
  returned: success
  type: int
  sample: 1700000300
cmd:
  description: The C(scontrol) command that ran.
  returned: always
  type: list
  elements: str
  sample: [/usr/bin/scontrol, token, username=root, lifespan=300]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.scontrol_token import SCONTROL, TokenError, mint_token


def main():
    module = AnsibleModule(
        argument_spec={
            "username": {"type": "str"},
            "lifespan": {"type": "int"},
            "scontrol_path": {"type": "path"},
            "slurm_conf": {"type": "path"},
        },
        supports_check_mode=True,
    )
    params = module.params
    scontrol = params["scontrol_path"] or module.get_bin_path(SCONTROL, required=True)
    environ = {"SLURM_CONF": params["slurm_conf"]} if params["slurm_conf"] else None

    def run(argv, **kwargs):
        return module.run_command(argv, check_rc=False, **kwargs)

    try:
        result = mint_token(run, scontrol, params["username"], params["lifespan"], environ)
    except ValueError as err:
        module.fail_json(msg=str(err), changed=False)
    except TokenError as err:
        module.fail_json(msg=err.msg, changed=False, **err.to_dict())

    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
