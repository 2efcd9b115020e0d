# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for module_utils/jwt.py (Slurm's HS256 tokens, stdlib only)."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import base64
import hashlib
import hmac
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.hybridhpc.slurm.plugins.module_utils import jwt

KEY = bytes(range(32))
NOW = 1_700_000_000


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_token_has_slurm_header_and_claims():
    token = jwt.sign_hs256_token(KEY, "root", 300, now=NOW)
    header_b64, claims_b64, sig_b64 = token.split(".")
    assert json.loads(unb64url(header_b64)) == {"alg": "HS256", "typ": "JWT"}
    assert json.loads(unb64url(claims_b64)) == {"exp": NOW + 300, "iat": NOW, "sun": "root"}
    assert "=" not in token, "base64url without padding"
    expected = hmac.new(KEY, (header_b64 + "." + claims_b64).encode(), hashlib.sha256).digest()
    assert unb64url(sig_b64) == expected


def test_independently_built_token_verifies():
    # A token assembled by hand, like libjwt (and so scontrol token) makes it.
    header = b64url(b'{"alg":"HS256","typ":"JWT"}')
    claims = b64url(json.dumps({"iat": NOW, "exp": NOW + 60, "sun": "alice"}).encode())
    sig = b64url(hmac.new(KEY, (header + "." + claims).encode(), hashlib.sha256).digest())
    decoded = jwt.decode_hs256_token(header + "." + claims + "." + sig, KEY, now=NOW)
    assert decoded == {"iat": NOW, "exp": NOW + 60, "sun": "alice"}
    assert jwt.token_username(decoded) == "alice"


def test_round_trip():
    token = jwt.sign_hs256_token(KEY, "slurm", 1800, now=NOW)
    claims = jwt.decode_hs256_token(token, KEY, now=NOW + 1799)
    assert jwt.token_username(claims) == "slurm"
    assert jwt.seconds_left(claims, now=NOW + 1000) == 800


def test_expired_token_is_rejected_like_slurmctld():
    token = jwt.sign_hs256_token(KEY, "root", 10, now=NOW)
    # slurmctld: rejected once exp < now; still valid at exp itself
    assert jwt.decode_hs256_token(token, KEY, now=NOW + 10)["exp"] == NOW + 10
    with pytest.raises(jwt.TokenExpired):
        jwt.decode_hs256_token(token, KEY, now=NOW + 11)
    # ... unless expiry is not checked, or within the leeway
    assert jwt.decode_hs256_token(token, KEY, verify_exp=False, now=NOW + 10_000)["sun"] == "root"
    assert jwt.decode_hs256_token(token, KEY, now=NOW + 15, leeway=5)["sun"] == "root"


def test_wrong_key_is_rejected():
    token = jwt.sign_hs256_token(KEY, "root", 300, now=NOW)
    with pytest.raises(jwt.InvalidSignature):
        jwt.decode_hs256_token(token, KEY[:-1] + b"\x00", now=NOW)


def test_key_is_every_byte_of_the_file():
    # Slurm mmaps the whole key file: a trailing newline is part of the key.
    token = jwt.sign_hs256_token(KEY + b"\n", "root", 300, now=NOW)
    with pytest.raises(jwt.InvalidSignature):
        jwt.decode_hs256_token(token, KEY, now=NOW)
    assert jwt.decode_hs256_token(token, KEY + b"\n", now=NOW)["sun"] == "root"


def test_tampered_claims_are_rejected():
    token = jwt.sign_hs256_token(KEY, "alice", 300, now=NOW)
    header, claims, sig = token.split(".")
    forged = b64url(json.dumps({"exp": NOW + 300, "iat": NOW, "sun": "root"}).encode())
    with pytest.raises(jwt.InvalidSignature):
        jwt.decode_hs256_token(header + "." + forged + "." + sig, KEY, now=NOW)


def test_alg_none_and_other_algorithms_are_rejected():
    claims = b64url(json.dumps({"exp": NOW + 300, "iat": NOW, "sun": "root"}).encode())
    for alg in ("none", "RS256", "HS512"):
        header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
        with pytest.raises(jwt.JWTError, match="algorithm"):
            jwt.decode_hs256_token(header + "." + claims + ".", KEY, now=NOW)


@pytest.mark.parametrize("token", [
    "",
    "abc",
    "a.b",
    "a.b.c.d",
    "!!!.e30.sig",
    b64url(b"not json") + "." + b64url(b"{}") + ".x",
    b64url(b"[1]") + "." + b64url(b"{}") + ".x",
    12345,
])
def test_malformed_tokens_raise_jwterror(token):
    with pytest.raises(jwt.JWTError):
        jwt.decode_hs256_token(token, KEY, now=NOW)


def test_missing_exp_fails_only_when_checked():
    header = b64url(b'{"alg":"HS256","typ":"JWT"}')
    claims = b64url(b'{"sun":"root"}')
    sig = b64url(hmac.new(KEY, (header + "." + claims).encode(), hashlib.sha256).digest())
    token = header + "." + claims + "." + sig
    with pytest.raises(jwt.JWTError, match="exp"):
        jwt.decode_hs256_token(token, KEY, now=NOW)
    assert jwt.decode_hs256_token(token, KEY, verify_exp=False) == {"sun": "root"}
    assert jwt.seconds_left({"sun": "root"}) is None


def test_username_claim_fallback_like_slurm():
    assert jwt.token_username({"sun": "a", "username": "b"}) == "a"
    assert jwt.token_username({"username": "b"}) == "b"
    assert jwt.token_username({"sun": ""}) is None


def test_unverified_decode_reads_claims_without_key():
    token = jwt.sign_hs256_token(KEY, "root", 300, now=NOW)
    assert jwt.decode_token_unverified(token) == {"exp": NOW + 300, "iat": NOW, "sun": "root"}
    assert jwt.decode_token_unverified(token + "\n") == {"exp": NOW + 300, "iat": NOW, "sun": "root"}


@pytest.mark.parametrize("kwargs, error", [
    ({"key": b""}, ValueError),
    ({"key": 42}, TypeError),
    ({"username": ""}, ValueError),
    ({"username": None}, ValueError),
    ({"lifespan": 0}, ValueError),
    ({"lifespan": -5}, ValueError),
    ({"lifespan": True}, ValueError),
    ({"lifespan": "300"}, ValueError),
    ({"lifespan": 0xFFFFFFFE}, ValueError),
])
def test_sign_rejects_bad_arguments(kwargs, error):
    args = {"key": KEY, "username": "root", "lifespan": 300}
    args.update(kwargs)
    with pytest.raises(error):
        jwt.sign_hs256_token(args["key"], args["username"], args["lifespan"], now=NOW)


def test_text_key_is_utf8():
    token = jwt.sign_hs256_token("secret", "root", 300, now=NOW)
    assert jwt.decode_hs256_token(token, b"secret", now=NOW)["sun"] == "root"


def test_default_now_is_the_clock(monkeypatch):
    monkeypatch.setattr(jwt.time, "time", lambda: NOW + 0.9)
    claims = jwt.decode_hs256_token(jwt.sign_hs256_token(KEY, "root", 5), KEY)
    assert claims["iat"] == NOW and claims["exp"] == NOW + 5


@given(
    key=st.binary(min_size=1, max_size=64),
    username=st.text(min_size=1, max_size=32).filter(lambda s: s.strip()),
    lifespan=st.integers(min_value=1, max_value=10**9),
    now=st.integers(min_value=0, max_value=2**33),
)
def test_round_trip_property(key, username, lifespan, now):
    token = jwt.sign_hs256_token(key, username, lifespan, now=now)
    claims = jwt.decode_hs256_token(token, key, now=now + lifespan)
    assert claims == {"exp": now + lifespan, "iat": now, "sun": username}
    assert token.count(".") == 2
