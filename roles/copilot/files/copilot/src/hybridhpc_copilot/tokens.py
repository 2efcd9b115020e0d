"""Short-lived slurmrestd tokens.

Each source hands out ``current()`` (a token valid for a while yet) and
``refresh()`` (a new one now: after slurmrestd answered 401/511).

* :class:`KeyFileTokens` signs HS256 tokens itself from Slurm's JWT key file
  (claims ``sun``, ``iat``, ``exp``), re-reading the key at each signature so a
  rotated key is picked up; a token is replaced once a third of its life is left.
* :class:`SecretTokens` reads the token ACK keeps in the Secret
  ``ack-slurm-operator/ack-slurm-jwt-token`` (key: cluster name) and reads it
  again before the token expires.
* :class:`FileTokens` reads a token file (for a token some other job renews).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from . import names

Clock = Callable[[], float]


class Tokens(Protocol):
    def current(self) -> str:
        """A token valid for a while yet."""

    def refresh(self) -> str:
        """A new token now (slurmrestd refused the current one)."""


class TokenError(Exception):
    """No usable token: the message says which file, Secret or key to fix."""


def _seconds_left(token: str, now: float) -> float | None:
    from ._vendor import jwt

    try:
        left: float = jwt.seconds_left(jwt.decode_token_unverified(token), now=now)
    except ValueError:
        return None
    return left


class KeyFileTokens:
    def __init__(self, key_file: str, user: str = "slurm", lifespan: int = 300, clock: Clock = time.time):
        if lifespan < 30:
            raise ValueError("token_lifespan must be at least 30 seconds, got %d" % lifespan)
        self.key_file, self.user, self.lifespan, self.clock = key_file, user, int(lifespan), clock
        self._token: str | None = None
        self._expires = 0.0

    def current(self) -> str:
        if self._token is None or self._expires - self.clock() < self.lifespan / 3:
            return self.refresh()
        return self._token

    def refresh(self) -> str:
        from ._vendor import jwt

        try:
            with open(self.key_file, "rb") as handle:
                key = handle.read()  # the whole file, newline included: Slurm signs with all of it
        except OSError as err:
            raise TokenError("cannot read the JWT key %s: %s (set jwt_key_file)" % (self.key_file, err)) from err
        now = int(self.clock())
        token = jwt.sign_hs256_token(key, self.user, self.lifespan, now=now)
        self._token, self._expires = token, now + self.lifespan
        return token


class SecretTokens:
    """The token in a Secret; ``read_secret(namespace, name)`` returns the Secret object or None."""

    def __init__(self, read_secret: Callable[[str, str], Mapping[str, Any] | None], key: str,
                 namespace: str = names.JWT_SECRET_NAMESPACE, name: str = names.JWT_SECRET_NAME, min_left: float = 60,
                 clock: Clock = time.time):
        self.read_secret, self.key, self.namespace, self.name = read_secret, key, namespace, name
        self.min_left, self.clock = min_left, clock
        self._token: str | None = None

    def current(self) -> str:
        if self._token is not None:
            left = _seconds_left(self._token, self.clock())
            if left is None or left > self.min_left:
                return self._token
        return self.refresh()

    def refresh(self) -> str:
        where = "Secret %s/%s key %s" % (self.namespace, self.name, self.key)
        secret = self.read_secret(self.namespace, self.name)
        if not secret:
            raise TokenError("%s: the Secret does not exist" % where)
        data = (secret.get("data") or {}).get(self.key)
        if not data:
            raise TokenError("%s: the Secret has no such key" % where)
        token = decode_secret_token(data, where)
        self._token = token
        return token


def decode_secret_token(data: str, where: str = "the Secret") -> str:
    """A Secret's ``data`` value is base64; ACK's value is itself a base64 token: accept both."""
    text = data
    for _ in range(2):
        try:
            text = base64.b64decode(text, validate=True).decode("ascii").strip()
        except (binascii.Error, UnicodeDecodeError, ValueError) as err:
            raise TokenError("%s: not base64 (%s)" % (where, err)) from err
        if text.count(".") == 2:
            return text
    raise TokenError("%s: the value is not a JWT" % where)


class FileTokens:
    def __init__(self, path: str):
        self.path = path

    def current(self) -> str:
        return self.refresh()

    def refresh(self) -> str:
        try:
            with open(self.path, encoding="ascii") as handle:
                token = handle.read().strip()
        except OSError as err:
            raise TokenError("cannot read the token file %s: %s" % (self.path, err)) from err
        if not token:
            raise TokenError("the token file %s is empty" % self.path)
        return token
