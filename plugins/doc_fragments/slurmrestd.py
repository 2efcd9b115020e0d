# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001


class ModuleDocFragment:

    # Connection options shared by every module that talks to slurmrestd
    # (see slurmrestd_argument_spec() and client_from_module() in
    # module_utils/slurmrestd.py).
    DOCUMENTATION = r"""
options:
  slurmrestd_url:
    description:
      - Base URL of slurmrestd, without the C(/slurm/v0.0.4x) part, for example
        V(http://ctl1.example.org:6820).
      - With O(slurmrestd_unix_socket), requests go to the socket and this URL
        only names the host in them.
      - The API version is chosen by asking C(GET /slurm/VERSION/ping) for
        V(v0.0.45), V(v0.0.44), V(v0.0.43), V(v0.0.42), V(v0.0.41) and V(v0.0.40),
        in that order - the newest the server serves. Slurm 24.11 serves
        v0.0.40 to v0.0.42, Slurm 26.05 v0.0.42 to v0.0.45; Slurm 22.05 (v0.0.36 to
        v0.0.38) is refused with the versions its C(GET /openapi/v3) lists.
    type: str
    default: http://localhost:6820
  slurmrestd_unix_socket:
    description:
      - Path of a UNIX socket slurmrestd listens on (C(slurmrestd unix:/path)),
        used instead of TCP.
      - Over a socket slurmrestd may authenticate the connecting process itself
        (C(rest_auth/local)); a token is then not needed.
    type: path
  slurmrestd_user:
    description:
      - Slurm user name sent as C(X-SLURM-USER-NAME).
      - Defaults to the user the token was issued for (its C(sun) claim).
      - Naming another user than the token's only works with a token of root
        or the SlurmUser.
    type: str
  slurmrestd_token:
    description:
      - JSON Web Token sent as C(X-SLURM-USER-TOKEN), as printed by
        C(scontrol token) (the part after C(SLURM_JWT=)) or signed with
        P(hybridhpc.slurm.slurm_jwt#lookup).
      - Defaults to the E(SLURM_JWT) environment variable of the managed host.
      - Without a token slurmrestd answers 401. An expired token, a token signed
        with another key, or one for a user Slurm does not know is rejected
        (HTTP 511).
      - Changing nodes needs the token of a Slurm administrator (root, the
        SlurmUser, or C(AdminLevel=Admin)).
    type: str
  slurmrestd_timeout:
    description:
      - Seconds to wait for slurmrestd to connect and to answer, per request.
      - Connection failures and answers 502, 503 and 504 are retried 3 times with
        exponential backoff (0.5, 1 and 2 seconds); a job submission is only
        retried when it cannot have reached Slurm, so it never runs twice. Slurm
        errors (HTTP 500) and 4xx answers are not retried.
    type: float
    default: 10
  slurmrestd_validate_certs:
    description:
      - Whether to check slurmrestd's TLS certificate, for an V(https://) URL
        (usually a TLS proxy in front of slurmrestd).
      - Proxy environment variables (E(HTTP_PROXY), E(HTTPS_PROXY)) are not used.
    type: bool
    default: true
requirements:
  - The Python library C(httpx) on the host the module runs on (Debian/Ubuntu
    package C(python3-httpx), or C(pip install httpx)).
  - slurmrestd with JWT authentication (C(AuthAltTypes=auth/jwt) in
    C(slurm.conf) and C(slurmdbd.conf)), reachable from that host.
notes:
  - Tokens are short-lived credentials. Mint them just before use, with
    M(hybridhpc.slurm.slurm_token) on a controller or the
    P(hybridhpc.slurm.slurm_jwt#lookup) lookup on the Ansible controller, and
    keep them out of logs with C(no_log).
seealso:
  - name: Slurm REST API
    description: slurmrestd endpoints and data formats.
    link: https://slurm.schedmd.com/rest_api.html
  - name: Slurm JWT authentication
    description: How Slurm signs and checks JSON Web Tokens.
    link: https://slurm.schedmd.com/jwt.html
"""
