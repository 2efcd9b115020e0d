# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sign and read the HS256 JSON Web Tokens that Slurm's auth/jwt accepts.

Standard library only (hmac, hashlib, base64, json): no PyJWT, so the
lookup plugin on the Ansible controller, the modules on managed nodes and
long-running helpers can all share it.

Slurm facts this follows (src/plugins/auth/jwt/auth_jwt.c, jwt.html):

* ``scontrol token`` signs ``{"alg": "HS256", "typ": "JWT"}`` tokens with
  the claims ``iat`` (issued at), ``exp`` (expiry) and ``sun`` ("[s]lurm
  [u]ser[n]ame"); slurmctld/slurmdbd also accept ``username`` when ``sun``
  is missing.
* The HMAC key is the *whole* key file (``AuthAltParameters=jwt_key=...``,
  default ``StateSaveLocation/jwt_hs256.key``) as raw bytes, trailing
  newline included, so keys must be read in binary and never stripped.
* A token is rejected once ``exp < now``; there is no ``nbf`` check.
* A token for user A sent with ``X-SLURM-USER-NAME: B`` is only accepted
  when A is root or the SlurmUser (impersonation).
"""

from __future__ import absolute_import, annotations, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import base64
import binascii
import hashlib
import hmac
import json
import time

HEADER = {"alg": "HS256", "typ": "JWT"}

# Slurm rejects lifespans >= NO_VAL (0xfffffffe) in auth_p_token_generate();
# locally signed tokens follow the same bound so both behave alike.
MAX_LIFESPAN = 0xFFFFFFFE - 1


class JWTError(ValueError):
    """A token is malformed, or fails verification."""


class InvalidSignature(JWTError):
    """The signature does not match the key (wrong key, or a modified token)."""


class TokenExpired(JWTError):
    """The ``exp`` claim is in the past."""


def _b64url_encode(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(segment):
    if not isinstance(segment, str):
        raise JWTError("token segments must be text")
    if not segment or any(c not in _B64URL_ALPHABET for c in segment) or len(segment) % 4 == 1:
        raise JWTError("token segment is not base64url")
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError) as err:
        raise JWTError("token segment is not base64url: %s" % err) from err


_B64URL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _json_segment(obj):
    return _b64url_encode(json.dumps(obj, separators=(",", ":"), sort_keys=False).encode("utf-8"))


def _as_key(key):
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError("the JWT key must be bytes (the raw content of the jwt_hs256.key file)")
    if not key:
        raise ValueError("the JWT key is empty")
    return bytes(key)


def _signature(key, signing_input):
    return hmac.new(key, signing_input, hashlib.sha256).digest()


def sign_hs256_token(key: bytes, username: str, lifespan: int, now: int | None = None) -> str:
    """Return a token Slurm accepts for ``username`` during ``lifespan`` seconds.

    The same token ``scontrol token username=USERNAME lifespan=LIFESPAN``
    prints: claims ``iat`` (``now``, default the current time), ``exp``
    (``iat + lifespan``) and ``sun``.
    """
    key = _as_key(key)
    if not isinstance(username, str) or not username.strip():
        raise ValueError("username must be a non-empty string")
    if isinstance(lifespan, bool) or not isinstance(lifespan, int):
        raise ValueError("lifespan must be an integer number of seconds")
    if lifespan <= 0 or lifespan > MAX_LIFESPAN:
        raise ValueError("lifespan must be between 1 and %d seconds, got %d" % (MAX_LIFESPAN, lifespan))
    issued = int(time.time()) if now is None else int(now)
    claims = {"exp": issued + lifespan, "iat": issued, "sun": username}
    signing_input = _json_segment(HEADER) + "." + _json_segment(claims)
    return signing_input + "." + _b64url_encode(_signature(key, signing_input.encode("ascii")))


def split_token(token):
    """Return ``(header, claims, signing_input, signature)`` of a token, unverified."""
    if isinstance(token, bytes):
        token = token.decode("ascii", "replace")
    if not isinstance(token, str):
        raise JWTError("a token must be a string")
    token = token.strip()
    parts = token.split(".")
    if len(parts) != 3:
        raise JWTError("a JWT has three dot-separated parts, this one has %d" % len(parts))
    header_b64, claims_b64, signature_b64 = parts
    try:
        header = json.loads(_b64url_decode(header_b64).decode("utf-8"))
        claims = json.loads(_b64url_decode(claims_b64).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        if isinstance(err, JWTError):
            raise
        raise JWTError("token header or claims are not JSON: %s" % err) from err
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise JWTError("token header and claims must be JSON objects")
    signature = _b64url_decode(signature_b64) if signature_b64 else b""
    return header, claims, (header_b64 + "." + claims_b64).encode("ascii"), signature


def decode_token_unverified(token):
    """Claims of a token without checking its signature or expiry.

    For reading ``exp``/``sun`` of a token Slurm itself issued (the key is
    not needed); never use the result to trust the token.
    """
    return split_token(token)[1]


def decode_hs256_token(token, key, verify_exp=True, now=None, leeway=0):
    """Verify an HS256 token with ``key`` and return its claims.

    Raises :class:`InvalidSignature` for a wrong key or a modified token,
    :class:`TokenExpired` when ``verify_exp`` and ``exp < now - leeway`` (the
    rule slurmctld applies), and :class:`JWTError` for anything malformed,
    including any ``alg`` other than HS256 (``none`` in particular).
    """
    key = _as_key(key)
    header, claims, signing_input, signature = split_token(token)
    if header.get("alg") != "HS256":
        raise JWTError("unsupported token algorithm %r (only HS256 is signed with a shared key)" % header.get("alg"))
    if not hmac.compare_digest(_signature(key, signing_input), signature):
        raise InvalidSignature("token signature does not match the key")
    if verify_exp:
        exp = claims.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            raise JWTError("token has no numeric exp claim")
        current = time.time() if now is None else now
        if exp < current - leeway:
            raise TokenExpired("token expired at %d (now %d)" % (exp, int(current)))
    return claims


def token_username(claims):
    """The user a token authenticates, as Slurm reads it: ``sun``, else ``username``."""
    for claim in ("sun", "username"):
        value = claims.get(claim)
        if isinstance(value, str) and value:
            return value
    return None


def seconds_left(claims, now=None):
    """Seconds until ``exp`` (negative once expired); ``None`` without ``exp``."""
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        return None
    current = time.time() if now is None else now
    return int(exp - current)
