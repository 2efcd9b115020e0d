# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Minting a Slurm JWT with ``scontrol token`` (the slurm_token and slurm_token_file modules)."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils.jwt import JWTError, decode_token_unverified, token_username

SCONTROL = "scontrol"
_TOKEN_LINE = re.compile(r"^\s*SLURM_JWT=(\S+)\s*$", re.MULTILINE)

# scontrol prints "scontrol: error: slurm_fetch_token: error with request: <slurm_strerror>"
# (src/api/token.c); slurmctld answers ESLURM_ACCESS_DENIED when token creation
# is disabled for the caller, ESLURM_USER_ID_MISSING ("Invalid user id") for a
# token for another user from a non-SlurmUser or for an unknown user, and
# ESLURM_INVALID_TIME_LIMIT above max_token_lifespan.
_FAILURES = (
    (
        ("access/permission denied", "access denied", "permission denied"),
        "slurmctld refused to create a token for this caller: with AuthAltParameters=disable_token_creation only root "
        "and the SlurmUser may run scontrol token (run the task as one of them, or sign tokens with the "
        "hybridhpc.slurm.slurm_jwt lookup)",
    ),
    (
        ("invalid user id", "user id missing"),
        "slurmctld refused to create a token for {user}: only root and the SlurmUser may mint tokens for other users, "
        "and the user must exist on the Slurm controller",
    ),
    (
        ("time limit", "lifespan"),
        "slurmctld refused the lifespan {lifespan}: it exceeds AuthAltParameters=max_token_lifespan (only the SlurmUser "
        "may exceed it)",
    ),
    (
        ("unable to generate", "unable to create", "no key loaded", "cannot issue", "auth/jwt", "plugin"),
        "slurmctld cannot create tokens: JWT authentication is not set up there (AuthAltTypes=auth/jwt and a jwt_key in "
        "AuthAltParameters, then restart slurmctld)",
    ),
    (
        ("unable to contact slurm controller", "connection refused", "communication", "timed out", "zero bytes"),
        "scontrol could not reach slurmctld (is it running, and does slurm.conf name it?)",
    ),
    (
        ("invalid option", "invalid keyword", "invalid command"),
        "this scontrol does not understand 'scontrol token' with these options",
    ),
)


class TokenError(Exception):
    """scontrol token failed, or printed no usable token."""

    def __init__(self, msg, argv=None, rc=None, stdout="", stderr=""):
        self.msg = msg
        self.argv = argv
        self.rc = rc
        self.stdout = stdout or ""
        self.stderr = stderr or ""
        super().__init__(msg)

    def to_dict(self):
        return {"cmd": self.argv, "rc": self.rc, "stdout": self.stdout, "stderr": self.stderr}


def token_argv(scontrol, username=None, lifespan=None):
    """``scontrol token [username=NAME] [lifespan=SECONDS]``."""
    argv = [scontrol, "token"]
    if username:
        argv.append("username=%s" % username)
    if lifespan is not None:
        argv.append("lifespan=%d" % lifespan)
    return argv


def explain_failure(stdout, stderr, username=None, lifespan=None):
    """Why ``scontrol token`` failed, from what it printed."""
    text = ((stderr or "") + "\n" + (stdout or "")).lower()
    for markers, reason in _FAILURES:
        if any(marker in text for marker in markers):
            return reason.format(user=username or "this user", lifespan=lifespan)
    return "scontrol token failed"


def validate(username, lifespan):
    if username is not None and (not username.strip() or any(c.isspace() for c in username) or "=" in username):
        raise ValueError("username %r is not a valid Slurm user name" % username)
    if lifespan is not None and lifespan <= 0:
        raise ValueError("lifespan must be a positive number of seconds, got %d" % lifespan)


def mint_token(run, scontrol, username=None, lifespan=None, environ=None):
    """Run ``scontrol token`` through ``run(argv, **kwargs) -> (rc, stdout, stderr)``.

    Returns the module result (token, username, lifespan, issued_at,
    expires_at, cmd, warnings); raises :class:`TokenError`.
    """
    validate(username, lifespan)
    argv = token_argv(scontrol, username, lifespan)
    kwargs = {"environ_update": dict(environ)} if environ else {}
    rc, stdout, stderr = run(argv, **kwargs)
    stdout, stderr = stdout or "", stderr or ""
    matches = _TOKEN_LINE.findall(stdout)
    if rc != 0 or not matches:
        reason = explain_failure(stdout, stderr, username, lifespan)
        if rc == 0:
            reason = "scontrol token printed no SLURM_JWT= line"
        raise TokenError("%s (rc %s)" % (reason, rc), argv=argv, rc=rc, stdout=stdout, stderr=stderr)
    token = matches[-1]
    try:
        claims = decode_token_unverified(token)
    except JWTError as err:
        raise TokenError("scontrol token printed something that is not a JWT: %s" % err, argv=argv, rc=rc, stderr=stderr) from err

    issued_at, expires_at = claims.get("iat"), claims.get("exp")
    if not isinstance(expires_at, int) or isinstance(expires_at, bool):
        raise TokenError("the token from scontrol has no exp claim", argv=argv, rc=rc, stderr=stderr)
    warnings = []
    granted = expires_at - issued_at if isinstance(issued_at, int) else None
    if lifespan is not None and granted is not None and granted != lifespan:
        warnings.append("asked for a lifespan of %d s, Slurm granted %d s" % (lifespan, granted))
    who = token_username(claims) or username
    if username and who and who != username:
        warnings.append("asked for a token for %s, Slurm issued one for %s" % (username, who))
    return {
        "changed": False,
        "token": token,
        "username": who,
        "lifespan": granted,
        "issued_at": issued_at,
        "expires_at": expires_at,
        "cmd": argv,
        "warnings": warnings,
    }


def needs_renewal(claims, now, lifespan, username):
    """Why a stored token must be replaced (a short reason), or None to keep it.

    Kept while more than a third of ``lifespan`` is left, so a site that runs
    the playbook at least that often never serves an expired token; replaced
    at once when it is for another user or cannot be read.
    """
    if claims is None:
        return "no token yet"
    expires_at = claims.get("exp")
    if not isinstance(expires_at, int) or isinstance(expires_at, bool):
        return "the stored token has no exp claim"
    if token_username(claims) != username:
        return "the stored token is for %s, not %s" % (token_username(claims), username)
    if expires_at - now < lifespan / 3.0:
        return "the stored token expires in %d s (renewed with a third of its %d s left)" % (max(expires_at - now, 0), lifespan)
    return None


def stored_claims(text):
    """The claims of a stored token, or None when there is none or it is no JWT."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        return decode_token_unverified(text)
    except JWTError:
        return None
