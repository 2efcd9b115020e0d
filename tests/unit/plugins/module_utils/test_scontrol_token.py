"""When a service's stored token is renewed (module_utils/scontrol_token.py)."""

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import scontrol_token as st
from ansible_collections.hybridhpc.slurm.plugins.module_utils.jwt import sign_hs256_token

NOW = 1_800_000_000
DAY = 86400


def claims(user="slurm-exporter", left=20 * DAY, lifespan=30 * DAY):
    return st.stored_claims(sign_hs256_token(b"k" * 32, user, lifespan, now=NOW + left - lifespan))


@pytest.mark.parametrize("stored, reason", [
    (claims(left=20 * DAY), None),
    (claims(left=10 * DAY + 1), None),
    (claims(left=10 * DAY - 1), "the stored token expires in 863999 s (renewed with a third of its 2592000 s left)"),
    (claims(left=-5), "the stored token expires in 0 s"),
    (claims(user="root"), "the stored token is for root, not slurm-exporter"),
    (None, "no token yet"),
    ({"sun": "slurm-exporter"}, "the stored token has no exp claim"),
])
def test_renewed_with_a_third_of_its_life_left_or_when_it_is_not_ours(stored, reason):
    got = st.needs_renewal(stored, NOW, 30 * DAY, "slurm-exporter")
    assert got == reason if reason is None else got.startswith(reason)


def test_a_file_that_holds_no_jwt_counts_as_none():
    assert st.stored_claims("") is None and st.stored_claims("garbage\n") is None
    assert st.stored_claims(sign_hs256_token(b"k" * 32, "u", 60, now=NOW) + "\n")["sun"] == "u"
