# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for module_utils/hostlist.py.

Every literal expectation below (names, hostlists, which inputs fail) was
printed by the real scontrol of Slurm 24.11.5 (Debian trixie slurm-client
24.11.5-4+deb13u1): EXPAND_CASES by ``scontrol show hostnames EXPR``,
COMPRESS_CASES by ``scontrol show hostlist EXPR``, SORTED_CASES by
``scontrol show hostlistsorted EXPR``, SLURM_ERRORS are rejected by all three
(``Invalid hostlist: EXPR``).  STRICTER lists inputs scontrol accepts but
mangles, which we reject on purpose; their scontrol output is in the comments.
tests/integration/hostlist_vs_scontrol.py re-checks all of this against a
live scontrol on random input.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import hashlib
from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ansible_collections.hybridhpc.slurm.plugins.module_utils import hostlist as hl
from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import (
    HostlistError,
    compress,
    expand,
)

EXPAND_CASES = [
    ('n[1-3,7,010-012]', ['n1', 'n2', 'n3', 'n7', 'n010', 'n011', 'n012']),
    ('n[01-3]', ['n01', 'n02', 'n03']),
    ('n[1-03]', ['n1', 'n2', 'n3']),
    ('n[9-11]', ['n9', 'n10', 'n11']),
    ('n[098-101]', ['n098', 'n099', 'n100', 'n101']),
    ('rack[1-2]-n[01-02]', ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']),
    ('a[1-2]b[3-4]c[5-6]', ['a1b3c5', 'a1b3c6', 'a2b3c5', 'a2b3c6', 'a1b4c5', 'a1b4c6', 'a2b4c5', 'a2b4c6']),
    ('n[1-3]-ib', ['n1-ib', 'n2-ib', 'n3-ib']),
    ('n[1-2]5', ['n15', 'n25']),
    ('login,head', ['login', 'head']),
    ('n1 n2\tn3\nn4', ['n1', 'n2', 'n3', 'n4']),
    (',,n1,,n2,', ['n1', 'n2']),
    ('[1-3]', ['1', '2', '3']),
    ('n[1-]', ['n1']),
    ('n[+1]', ['n01']),
    ('n[1, 2]', ['n1', 'n02']),
    ('n[ 1- 3]', ['n01', 'n02', 'n03']),
    ('nid0000[2-7]', ['nid00002', 'nid00003', 'nid00004', 'nid00005', 'nid00006', 'nid00007']),
    ('n3,n1,n3', ['n3', 'n1', 'n3']),
    ('n[0-2]', ['n0', 'n1', 'n2']),
    ('', []),
    ('n[1,1-2]', ['n1', 'n1', 'n2']),
    ('node001', ['node001']),
    ('a[1]b[2,3]', ['a1b2', 'a1b3']),
    ('a[1,2]b[3]', ['a1b3', 'a2b3']),
    ('gpu[1-2],cn[3-4]-bmc,login', ['gpu1', 'gpu2', 'cn3-bmc', 'cn4-bmc', 'login']),
    ('n[18446744073709551613-18446744073709551614]', ['n18446744073709551613', 'n18446744073709551614']),
    ('rack[01-02]-[1-2]', ['rack01-1', 'rack01-2', 'rack02-1', 'rack02-2']),
    ('n[00-02]', ['n00', 'n01', 'n02']),
]

COMPRESS_CASES = [
    ('n1,n2,n3,n5', 'n[1-3,5]'),
    ('n3,n2,n1', 'n[3,2,1]'),
    ('n1,n1', 'n[1,1]'),
    ('n9,n10', 'n[9-10]'),
    ('n09,n10', 'n[09-10]'),
    ('n9,n010', 'n[9,010]'),
    ('n99,n100', 'n[99-100]'),
    ('n098,n99', 'n[098,99]'),
    ('1,2,3', '[1-3]'),
    ('n[1-2],,n3', 'n[1-3]'),
    ('n1,n2,n,n3', 'n[1-2],n,n3'),
    ('n[1-3],n[4-6],n7', 'n[1-7]'),
    ('n[1-2],n[1-2]', 'n[1-2,1-2]'),
    ('n[0-2]-ib,n[3-4]', 'n0-ib,n1-ib,n2-ib,n[3-4]'),
    ('nid00002,nid00003,nid00004', 'nid[00002-00004]'),
    ('rack1-n01,rack1-n02,rack2-n01', 'rack1-n[01-02],rack2-n01'),
    ('login', 'login'),
    ('', ''),
    ('n01,n1', 'n[01,1]'),
    ('a1,b1,a2', 'a1,b1,a2'),
    ('n[1-3]x', 'n1x,n2x,n3x'),
    ('n3,n1,n2', 'n[3,1-2]'),
    ('n1,n2,n3,n5,n4', 'n[1-3,5,4]'),
    ('n[1-3,2-5]', 'n[1-3,2-5]'),
    ('n8,n9,n10,n11,n012', 'n[8-11,012]'),
    ('gpu1,gpu2,cn1,gpu3', 'gpu[1-2],cn1,gpu3'),
    ('n0,n1,n00,n01', 'n[0-1,00-01]'),
]

SORTED_CASES = [
    ('n3,n2,n1,n1,n4', 'n[1,1-4]'),
    ('n[1-5],n[3-7]', 'n[1-3,3-4,4-5,5-7]'),
    ('n[1-3],n[1-3]', 'n[1,1-2,2-3,3]'),
    ('n[1-10],n[3-4],n[5-6]', 'n[1-3,3-4,4-5,5-6,6-10]'),
    ('n[1-2]5,n16,n', 'n,n16,n15,n25'),
    ('n1,n', 'n,n1'),
    ('rack10-n1,rack2-n1,rack02-n1', 'rack02-n1,rack2-n1,rack10-n1'),
    ('b1,a2,a1,c,b', 'a[1-2],b,b1,c'),
    ('n1,n01,n001,n10,n010,n100,n0100,n5,n05', 'n[1,5,01,05,10,001,010,100,0100]'),
    ('n[01-02],n[1-2]', 'n[1-2,01-02]'),
    ('n[1-3]x,n', 'n,n1x,n2x,n3x'),
    ('n1,n4294967297', 'n[1,4294967297]'),
    ('n18446744073709551614,n18446744073709551613', 'n[18446744073709551613-18446744073709551614]'),
    ('n3000000001,n3000000000,n3000000002', 'n[3000000000-3000000002]'),
    ('x10,x9,x8', 'x[8-10]'),
    ('gpu[1-4],cn[1-2],gpu5', 'cn[1-2],gpu[1-5]'),
    ('n3,n1,n2', 'n[1-3]'),
    ('n1,n1,n2', 'n[1,1-2]'),
    ('n[1-3],n[2-4]', 'n[1-2,2-3,3-4]'),
    ('B1,a1,A1,b1', 'A1,B1,a1,b1'),
    ('node-10,node-9,node2,node10', 'node[2,10],node-[9-10]'),
    ('', ''),
    ('n5', 'n5'),
]


# Rejected by scontrol as well; the fragment is from our message.
SLURM_ERRORS = [
    ("n[5-1]", "is reversed; write the lower bound first, e.g. 1-5"),
    ("rack[2-1]-n[1-2]", "is reversed"),
    ("n[]", "empty range"),
    ("n[1,,2]", "empty range"),
    ("n[,1]", "empty range"),
    ("n[1-2", "has no matching ']'"),
    ("n]1[", "has no matching ']'"),
    ("n[a-b]", "is not numeric"),
    ("n[1-2-3]", "is not numeric"),
    ("n[1-70000]", "holds 70000 hosts but Slurm allows at most 65536"),
    ("n[0-65536]", "holds 65537 hosts"),
    ("n[1x3]", "contains 'x'"),
    ("n[1--3]", "negative"),
    ("n[-3]", "no lower bound"),
]

# Accepted by scontrol 24.11.5, which then prints mangled names (shown after
# the arrow); rejected here.
STRICTER = [
    ("n1]", "no matching '['"),  # -> n1]
    ("n[1-2]]", "do not pair up"),  # -> n1] n2]
    ("a[b[1-2]", "do not pair up"),  # -> a[b1 a[b2
    ("n[1-2]x[,n5,m[1]", "do not pair up"),  # -> one name: n[1-2]x[,n5,m1
    ("n[1a-3]", "junk after the number"),  # -> n01 n02 n03
    ("n[1 -3]", "junk after the number"),  # -> n01 n02 n03
    ("a[x]b[1-2]c[1-2]", "contains 'x'"),  # -> no names, exit status 0 (errors on stderr)
    ("n99999999999999999999", "does not fit"),  # -> n18446744073709551615
    ("n[18446744073709551614-18446744073709551615]", "does not fit"),  # -> segfault
    ("n1\rn2", "control character"),  # -> n1<CR>n2, one name
]

# Sorted inputs on which Slurm's hostlist_coalesce() reads freed memory.
# scontrol printed these (the heap happened to hand the freed hostrange
# straight back); compress(sort=True) raises instead.
SORT_BUGS = [
    ("n3000000000,n1", "n[3000000000]"),
    ("n4294967297,n1", "n[4294967297]"),
    ("c[99-115],c[99-115],c[002-026]",
     "c[99,99-100,100-101,101-102,102-103,103-104,104-105,105-106,106-107,107-108,108-109,"
     "109-110,110-111,111-112,112-113,113-114,114-115,115]"),
    ("r01n[97-112],r01n[98-118],r01n[000-010]",
     "r01n[97-98,98-99,99-100,100-101,101-102,102-103,103-104,104-105,105-106,106-107,"
     "107-108,108-109,109-110,110-111,111-112,112]"),
]


@pytest.mark.parametrize("expr, names", EXPAND_CASES)
def test_expand_matches_scontrol_hostnames(expr, names):
    assert expand(expr) == names
    assert expand([expr]) == names


@pytest.mark.parametrize("expr, want", COMPRESS_CASES)
def test_compress_matches_scontrol_hostlist(expr, want):
    assert compress([expr]) == want
    assert compress(expr) == want


@pytest.mark.parametrize("expr, want", SORTED_CASES)
def test_compress_sorted_matches_scontrol_hostlistsorted(expr, want):
    assert compress([expr], sort=True) == want


@pytest.mark.parametrize("expr, fragment", SLURM_ERRORS + STRICTER)
def test_invalid_input_raises_clear_error(expr, fragment):
    for call in (expand, compress, lambda x: compress(x, sort=True)):
        with pytest.raises(HostlistError) as info:
            call(expr)
        message = str(info.value)
        assert fragment in message
        assert message.startswith("invalid hostlist %r" % expr[:120])


def test_error_is_a_value_error():
    assert issubclass(HostlistError, ValueError)


@pytest.mark.parametrize("expr, slurm_output", SORT_BUGS)
def test_sort_raises_where_slurm_reads_freed_memory(expr, slurm_output):
    with pytest.raises(HostlistError, match="Slurm's hostlistsorted breaks on it"):
        compress([expr], sort=True)
    # Unsorted is fine, and the emulation of the freed-memory path predicts
    # what scontrol printed.
    compress([expr])
    assert hl._compress([expr], True, lambda: "reuse") == slurm_output


def test_sort_bug_stale_variant():
    # With 12 unrelated names in front, glibc's tcache was full and scontrol
    # read the stale hostrange instead: every overlap number twice.
    expr = ",".join("p%d-x%d" % (i, i) for i in range(1, 13)) + ",r01n[97-112,000-10,98-118]"
    got = hl._compress([expr], True, lambda: "stale")
    assert got.endswith(
        "r01n[97-98,98-99,99-100,100-101,101-102,102-103,103-104,104-105,105-106,106-107,"
        "107-108,108-109,109-110,110-111,111-112,112,000-001,001-002,002-003,003-004,004-005,"
        "005-006,006-007,007-008,008-009,009-010]")


def test_list_and_iterable_inputs():
    assert expand(["n[1-2]", "login", "", "gpu[01-02]"]) == ["n1", "n2", "login", "gpu01", "gpu02"]
    assert compress(["n1", "n2", "n[3-4]", "n6"]) == "n[1-4,6]"
    assert compress(name for name in ("n3", "n1", "n2")) == "n[3,1-2]"
    assert compress(("n3", "n1", "n2"), sort=True) == "n[1-3]"
    assert compress([]) == ""
    assert expand([]) == []
    assert expand("") == []
    # list items are separate expressions: brackets do not pair across items
    with pytest.raises(HostlistError):
        expand(["n[1", "2]"])


@pytest.mark.parametrize("bad", [None, 5, b"n1", {"n1": 1}, [1], ["n1", None]])
def test_wrong_types_raise(bad):
    with pytest.raises(HostlistError, match="expects"):
        expand(bad)
    with pytest.raises(HostlistError, match="expects"):
        compress(bad)


def test_long_input_is_shortened_in_messages():
    expr = ",".join("node%04d" % i for i in range(500)) + ",n[5-1]"
    with pytest.raises(HostlistError) as info:
        expand(expr)
    assert len(str(info.value)) < 400
    assert "'5-1'" in str(info.value)


# ---------------------------------------------------------------- large lists

NAMES_15K = ["cn%05d" % i for i in range(1, 15001) if i % 5000]  # 14997 names
# deterministic shuffles (7919 is prime, coprime to both lengths)
PERM_15K = [NAMES_15K[(k * 7919) % len(NAMES_15K)] for k in range(len(NAMES_15K))]
DUP_18K = NAMES_15K + NAMES_15K[:3000]
DUP_PERM_18K = [DUP_18K[(k * 7919) % len(DUP_18K)] for k in range(len(DUP_18K))]


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_large_lists_match_scontrol():
    # scontrol show hostnames / hostlist / hostlistsorted of these lists
    expr = "cn[00001-04999,05001-09999,10001-14999]"
    assert expand(expr) == NAMES_15K
    assert compress(NAMES_15K) == expr
    assert compress(PERM_15K, sort=True) == expr
    unsorted = compress(PERM_15K)
    assert len(unsorted) == 89985
    assert unsorted.startswith("cn[00001,07921,00842,08762,01683,09603,02524,10445,03365,")
    assert _sha(unsorted) == "212198b94649c8aa25f6c76dcc5488fb348373f2f519b37d4af3a9a61a2c0ab8"
    assert _sha(compress(DUP_PERM_18K)) == "9682d2836f645bca9c49dcde038752d1cfb9a098310b6beb871ae8c25351c9c8"
    dup_sorted = compress(DUP_PERM_18K, sort=True)
    assert len(dup_sorted) == 36033
    assert dup_sorted.startswith("cn[00001,00001-00002,00002-00003,")
    assert dup_sorted.endswith("02999-03000,03000-04999,05001-09999,10001-14999]")
    assert _sha(dup_sorted) == "0885dbbde6c0825d6fb4e8a23a069e4d40f472a65e4e40e6563cd40de4aeeff5"
    assert expand(unsorted) == PERM_15K
    assert Counter(expand(dup_sorted)) == Counter(DUP_18K)


def test_100k_names_round_trip():
    names = ["n%06d" % i for i in range(1, 110001) if i % 1000]
    expr = compress(names)
    assert expr.count(",") == 109
    assert expand(expr) == names
    assert compress(names[::-1], sort=True) == expr
    assert len(expand("n[1-60000,60001-120000]")) == 120000


# ---------------------------------------------------------------- properties

PREFIXES = ["n", "node", "gpu-", "r1n", "", "x", "rack2-n", "a", "n0"]
WORDS = ["login", "head", "n", "gpu-a", "a-b", "x9y"]

_name = st.one_of(
    st.builds(lambda p, num, pad: "%s%0*d" % (p, pad, num),
              st.sampled_from(PREFIXES), st.integers(0, 1200), st.integers(0, 5)),
    st.sampled_from(WORDS),
)
_names = st.lists(_name, max_size=60)
_settings = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(_names)
def test_round_trip_keeps_order_and_duplicates(names):
    assert expand(compress(names)) == names


@_settings
@given(_names)
def test_sorted_round_trip_keeps_the_multiset(names):
    try:
        expr = compress(names, sort=True)
    except HostlistError:
        assume(False)  # only Slurm's freed-memory path raises for valid names
    assert Counter(expand(expr)) == Counter(names)


@_settings
@given(_names)
def test_compress_is_stable_on_its_own_output(names):
    expr = compress(names)
    assert compress(expr) == expr


@_settings
@given(st.lists(_name, unique=True, max_size=60), st.randoms(use_true_random=False))
def test_sorted_form_of_distinct_names_ignores_order(names, rnd):
    shuffled = list(names)
    rnd.shuffle(shuffled)
    assert compress(shuffled, sort=True) == compress(names, sort=True)


@_settings
@given(st.lists(st.tuples(st.sampled_from(PREFIXES), st.integers(0, 300), st.integers(0, 30),
                          st.integers(1, 4)), min_size=1, max_size=8))
def test_bracket_ranges_expand_to_every_number(parts):
    expr = ",".join("%s[%0*d-%0*d]" % (p, w, lo, w, lo + n) for p, lo, n, w in parts)
    want = ["%s%0*d" % (p, w, num) for p, lo, n, w in parts for num in range(lo, lo + n + 1)]
    assert expand(expr) == want
    assert expand(compress([expr])) == want
