# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm hostlist expressions, expanded and compressed exactly like Slurm 24.11.

``expand(x)`` prints what ``scontrol show hostnames x`` prints,
``compress(names)`` what ``scontrol show hostlist`` prints and
``compress(names, sort=True)`` what ``scontrol show hostlistsorted`` prints
(1-D clusters, i.e. every cluster that is not a BlueGene/Cray 3-D torus).
Pure standard library; runs on Python 3.8+.

How Slurm reads an expression (src/common/hostlist.c):

* Tokens are separated by ``,``, spaces, tabs and newlines; separators inside
  ``[...]`` belong to the token.
* In a token, the *last* ``[...]`` is the numeric part: a comma list of
  numbers and ``lo-hi`` ranges.  The digits written for the lower bound set
  the zero padding of the whole range: ``n[01-3]`` is n01 n02 n03,
  ``n[1-03]`` is n1 n2 n3, ``n[9-11]`` is n9 n10 n11.  A range holds at most
  65536 hosts.
* Earlier brackets in the token multiply out (``rack[1-2]-n[01-02]`` is
  rack1-n01 rack1-n02 rack2-n01 rack2-n02).  The last bracket varies
  fastest; of the earlier ones the rightmost varies slowest and the leftmost
  fastest (``a[1-2]b[3-4]c[5-6]`` is a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...).
* Text after the last ``]`` (``n[1-3]-ib``) is allowed; such hosts are kept
  as opaque names and never re-bracketed (``n1-ib,n2-ib,n3-ib``).
* A host name without brackets is split into a prefix and its trailing digits
  (``nid00012`` is prefix ``nid``, number 12, width 5).

How Slurm writes one (``scontrol show hostlist``):

* Order is kept.  A name is merged into the previous range only when it has
  the same prefix, the next number (``tail + 1``) and a compatible zero
  padding: ``n3,n2,n1`` stays ``n[3,2,1]``, ``n1,n1`` stays ``n[1,1]``,
  ``n9,n10`` becomes ``n[9-10]``, ``n9,n010`` stays ``n[9,010]``.
* Consecutive ranges with the same prefix share one pair of brackets.

``scontrol show hostlistsorted`` sorts the ranges (prefixes in natural order,
``strnatcmp``; names without a number first; then by padding width and
number) and then splits overlaps and re-joins neighbours the way Slurm's
``hostlist_coalesce()``/``hostlist_collapse()`` do.  Duplicates are *kept*:
``n3,n2,n1,n1,n4`` gives ``n[1,1-4]`` and ``n[1-5],n[3-7]`` gives
``n[1-3,3-4,4-5,5-7]``.  The quirks of that code are reproduced too (its
compare truncates differences of numbers 2**31 or more apart to an int, and
a range's padding is rewritten in place while splitting).  One path is not
reproducible: when a split leaves Slurm with a range that starts above its
end, Slurm deletes the wrong range and reads freed memory, so its output
(which drops or duplicates hosts) depends on malloc's state; e.g.
``n3000000000,n1`` sorts to ``n[3000000000]`` and
``c[999-1015],c[999-1015],c[0002-26]`` loses c0002-c0026.  For such inputs
``compress(..., sort=True)`` raises :class:`HostlistError`.

Where Slurm silently accepts garbage we raise :class:`HostlistError` instead
of copying its output:

* unbalanced brackets that Slurm turns into host names containing ``[`` or
  ``]`` (``n1]``, ``a[b[1-2]``, or an unclosed ``[`` that swallows the
  following names up to some later ``]``);
* a lower bound with trailing junk (``n[1a-3]``, which Slurm prints as
  n01 n02 n03);
* an invalid bracket before the last one (``a[x]b[1-2]c[1]``, for which
  Slurm prints nothing and reports success);
* numbers that do not fit below 2**64-1 (Slurm wraps or crashes);
* control characters other than tab and newline.

Everything else, including odd inputs Slurm accepts on purpose
(``n[1-]`` is n1, ``n[+1]`` and ``n[1, 2]`` pad to width 2 because the
written lower bound is two characters wide), matches scontrol byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

__all__ = ["HostlistError", "expand", "compress"]

# Slurm's MAX_SLURM_NODES: most hosts one bracket range may hold.
MAX_RANGE = 65536
# Slurm's MAX_PREFIX_CNT: most prefixes the earlier brackets of a token may produce.
MAX_PREFIX_COUNT = 65536
# Slurm aborts past this many comma items inside one pair of brackets.
MAX_RANGES = 256 * 1024
# Largest number Slurm keeps intact (ULONG_MAX itself marks an empty range).
MAX_NUMBER = (1 << 64) - 2

_MASK64 = (1 << 64) - 1
_SEPARATORS = "\t, \n"
_DIGITS = "0123456789"
_C_SPACE = " \t\n\v\f\r"
# Anything that needs the full parser rather than the plain host name path.
_SPECIAL = re.compile(r"[\[\]\t, \n\x00-\x1f\x7f]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# A trailing number of 20+ digits, which may not fit (names joined by '/').
_LONG_NUMBER = re.compile(r"[0-9]{20,}(?:/|$)")
_SHOW_MAX = 120


class HostlistError(ValueError):
    """An invalid Slurm hostlist expression; the message says what to change."""


# ---------------------------------------------------------------- messages


def _show(text):
    if len(text) > _SHOW_MAX:
        text = text[:_SHOW_MAX] + "..."
    return repr(text)


def _fail(text, what):
    raise HostlistError("invalid hostlist %s: %s" % (_show(text), what))


# ---------------------------------------------------------------- parsing


def _check_chars(text):
    bad = _CONTROL.search(text)
    if bad:
        _fail(text, "it contains the control character %r; separate host names with "
              "',', spaces, tabs or newlines only" % bad.group(0))


def _tokens(text):
    """Split like Slurm's _next_tok(): separators inside [...] do not split."""
    if "[" not in text:
        return [tok for tok in re.split(r"[\t, \n]+", text) if tok]
    out = []
    n = len(text)
    seps = _SEPARATORS
    i = 0
    # Cached "next '[' / ']' at or after" positions; str.find from every
    # token start would be quadratic on long lists.
    cache = {"[": (n + 1, -1), "]": (n + 1, -1)}

    def find(char, start):
        frm, pos = cache[char]
        if frm <= start and (pos == -1 or pos >= start):
            return pos  # same answer as a fresh search from start
        pos = text.find(char, start)
        cache[char] = (start, pos)
        return pos

    while True:
        while i < n and text[i] in seps:
            i += 1
        if i >= n:
            return out
        start = parse = i
        while True:
            while i < n and text[i] not in seps:
                i += 1
            extended = False
            while True:
                ob = find("[", parse)
                if ob == -1 or ob > i:
                    break
                cb = find("]", parse)
                if cb == -1 or cb < ob:
                    break
                if cb < i:
                    parse = cb + 1
                    continue
                i = cb
                extended = True
                break
            if not extended:
                break
        out.append(text[start:i])


def _strtoul(s):
    """(value, chars consumed, negative) like C strtoul(s, &end, 10)."""
    n = len(s)
    i = 0
    while i < n and s[i] in _C_SPACE:
        i += 1
    negative = False
    if i < n and s[i] in "+-":
        negative = s[i] == "-"
        i += 1
    j = i
    while j < n and s[j] in _DIGITS:
        j += 1
    if j == i:
        return 0, 0, False
    return int(s[i:j]), j, negative


def _number(text, token, digits):
    value = int(digits)
    if value > MAX_NUMBER:
        _fail(text, "the number %s in %r does not fit Slurm's 64-bit node index "
              "(largest usable value is %d)" % (digits, token, MAX_NUMBER))
    return value


def _parse_range(text, token, item):
    """One comma item of a bracket: (lo, hi, width)."""
    if item == "":
        _fail(text, "%r has an empty range (empty brackets or a doubled comma); put a number "
              "or a range such as 1-4 there, or drop the extra comma" % token)
    if "x" in item:
        _fail(text, "range %r in %r contains 'x'; box ranges only exist on multi-dimensional "
              "clusters, write numbers or ranges such as 1-4" % (item, token))
    dash = item.find("-")
    if dash >= 0:
        lo_text, hi_text = item[:dash], item[dash + 1:]
        if hi_text.startswith("-"):
            _fail(text, "range %r in %r has a negative bound; host numbers cannot be "
                  "negative" % (item, token))
    else:
        lo_text, hi_text = item, ""
    width = len(lo_text)
    lo, used, negative = _strtoul(lo_text)
    if used == 0:
        if lo_text.strip(_C_SPACE) == "":
            _fail(text, "range %r in %r has no lower bound; write it as lo-hi with decimal "
                  "numbers, e.g. 1-4 (host numbers cannot be negative)" % (item, token))
        _fail(text, "range %r in %r is not numeric; bracket ranges take decimal numbers "
              "such as 1-4 or 001-016, and commas for lists such as [1,3,5]" % (item, token))
    if used != len(lo_text):
        _fail(text, "range %r in %r has junk after the number %r; bracket ranges take "
              "decimal numbers such as 1-4 or 001-016" % (item, token, lo_text[:used].strip()))
    lo_digits = lo_text[:used].lstrip(_C_SPACE + "+-")
    lo = _number(text, token, lo_digits)
    if negative:
        _fail(text, "range %r in %r has a negative bound; host numbers cannot be "
              "negative" % (item, token))
    if hi_text:
        hi, used, negative = _strtoul(hi_text)
        if used == 0 or used != len(hi_text):
            _fail(text, "range %r in %r is not numeric; bracket ranges take decimal numbers "
                  "such as 1-4 or 001-016, and commas for lists such as [1,3,5]" % (item, token))
        if negative:
            _fail(text, "range %r in %r has a negative bound; host numbers cannot be "
                  "negative" % (item, token))
        hi = _number(text, token, hi_text.lstrip(_C_SPACE + "+"))
    else:
        hi = lo
    if lo > hi:
        _fail(text, "range %r in %r is reversed; write the lower bound first, e.g. "
              "%s-%s" % (item, token, hi_text.strip(_C_SPACE), lo_text.strip(_C_SPACE)))
    if hi - lo + 1 > MAX_RANGE:
        _fail(text, "range %r in %r holds %d hosts but Slurm allows at most %d per range; "
              "split it into several ranges, e.g. %d-%d,%d-%d"
              % (item, token, hi - lo + 1, MAX_RANGE, lo, lo + MAX_RANGE - 1,
                 lo + MAX_RANGE, hi))
    return lo, hi, width


def _parse_range_list(text, token, inner):
    items = inner.split(",")
    if len(items) > MAX_RANGES:
        _fail(text, "%r has %d comma items in one bracket; Slurm stops at %d, split the "
              "list" % (token, len(items), MAX_RANGES))
    return [_parse_range(text, token, item) for item in items]


def _stray_bracket(text, token):
    if "]" in token and "[" not in token:
        _fail(text, "']' in %r has no matching '['; add the opening bracket "
              "(e.g. node[1-4]) or remove it" % token)
    _fail(text, "the brackets in %r do not pair up; every '[' needs a ']' after it, "
          "e.g. rack[1-2]-node[01-16]" % token)


def _parse_token(text, token, emit_range, emit_name):
    """Feed one token to emit_range(prefix, lo, hi, width) / emit_name(name)."""
    p = token.rfind("[")
    if p < 0:
        if "]" in token:
            _stray_bracket(text, token)
        stem = token.rstrip(_DIGITS)
        if len(stem) == len(token):
            emit_name(token)
        else:
            digits = token[len(stem):]
            num = _number(text, token, digits)
            emit_range(stem, num, num, len(digits))
        return
    rest = token[p + 1:]
    q = rest.find("]")
    if q < 0:
        _fail(text, "'[' in %r has no matching ']'; close the bracket, e.g. "
              "node[1-4]" % token)
    after = rest[q + 1:]
    suffix = None
    if after:
        if after[0] == ",":
            after = ""  # Slurm ignores the rest here; a ',' cannot follow in practice
        elif "]" in after:
            _stray_bracket(text, token)
        else:
            suffix = after
    ranges = _parse_range_list(text, token, rest[:q])
    _push_prefixes(text, token, token[:p], suffix, ranges, emit_range, emit_name)


def _push_prefixes(text, token, prefix, suffix, ranges, emit_range, emit_name):
    """Multiply out brackets left of the last one (Slurm's _push_range_list)."""
    p = prefix.rfind("[")
    q = prefix.rfind("]", p) if p >= 0 else -1
    if p < 0 or q < 0:
        if "[" in prefix or "]" in prefix:
            _stray_bracket(text, token)
        for lo, hi, width in ranges:
            if suffix is None:
                emit_range(prefix, lo, hi, width)
            else:
                for num in range(lo, hi + 1):
                    emit_name("%s%0*d%s" % (prefix, width, num, suffix))
        return
    head, inner, tail = prefix[:p], prefix[p + 1:q], prefix[q + 1:]
    count = 0
    for lo, hi, width in _parse_range_list(text, token, inner):
        count += hi - lo + 1
        if count > MAX_PREFIX_COUNT:
            _fail(text, "the brackets before the last one in %r produce more than %d "
                  "prefixes; Slurm refuses that many, split the expression"
                  % (token, MAX_PREFIX_COUNT))
        for num in range(lo, hi + 1):
            _push_prefixes(text, token, "%s%0*d%s" % (head, width, num, tail), suffix,
                           ranges, emit_range, emit_name)


def _inputs(hostlist, what):
    if isinstance(hostlist, str):
        return [hostlist]
    if isinstance(hostlist, (bytes, bytearray)) or hostlist is None or isinstance(hostlist, dict):
        raise HostlistError("%s expects a hostlist string or a list of strings, got %s"
                            % (what, type(hostlist).__name__))
    try:
        items = list(hostlist)
    except TypeError:
        items = None
    if items is None:
        raise HostlistError("%s expects a hostlist string or a list of strings, got %s"
                            % (what, type(hostlist).__name__))
    for item in items:
        if not isinstance(item, str):
            raise HostlistError("%s expects host names as strings, got %s %r"
                                % (what, type(item).__name__, item))
    return items


# ---------------------------------------------------------------- expand


def expand(hostlist):
    """Host names of a hostlist expression, like ``scontrol show hostnames``.

    ``hostlist`` is one expression (``"n[1-3],login"``) or a list of them;
    order and duplicates are kept.  Raises :class:`HostlistError`.
    """
    out = []
    append = out.append

    def emit_range(prefix, lo, hi, width):
        if lo == hi:
            append("%s%0*d" % (prefix, width, lo))
        else:
            fmt = "%s%%0%dd" % (prefix.replace("%", "%%"), width)
            out.extend([fmt % num for num in range(lo, hi + 1)])

    items = _inputs(hostlist, "hostlist_expand")
    if len(items) > 1:
        # Many plain names: check them in one go; each expands to itself.
        joined = "/".join(items)
        if not _SPECIAL.search(joined) and not _LONG_NUMBER.search(joined):
            return [text for text in items if text]
    for text in items:
        if not _SPECIAL.search(text):
            # A plain host name prints as itself unless its number overflows.
            if text and text[-1] in _DIGITS and len(text) - len(text.rstrip(_DIGITS)) > 19:
                _number(text, text, text[len(text.rstrip(_DIGITS)):])
            if text:
                append(text)
            continue
        _check_chars(text)
        for token in _tokens(text):
            _parse_token(text, token, emit_range, append)
    return out


# ---------------------------------------------------------------- compress


class _Range(object):
    """One Slurm hostrange: prefix + [lo, hi] printed with zero padding width.

    ``single`` ranges are names without a usable number; prefix is the name.
    """

    __slots__ = ("prefix", "lo", "hi", "width", "single")

    def __init__(self, prefix, lo, hi, width, single=False):
        self.prefix = prefix
        self.lo = lo
        self.hi = hi
        self.width = width
        self.single = single

    def __repr__(self):
        return "_Range(%r, %r, %r, %r, %r)" % (self.prefix, self.lo, self.hi, self.width,
                                               self.single)


def _ndigits(num):
    return len(str(num))


def _width_equiv(n, wn, m, wm):
    """Slurm's _width_equiv(): can widths wn (of n) and wm (of m) share a range?

    True when equal, or when one of the two numbers has no zero padding under
    either width.  Slurm also rewrites one width in place; while the list is
    built (hostlist_push_range) that can only touch a range printed without
    padding anyway, so it is left out here.  The sorted path, where it does
    matter, uses _width_combine().
    """
    if wn == wm:
        return True
    big = wn if wn > wm else wm
    return _ndigits(n) >= big or _ndigits(m) >= big


class _Builder(object):
    """A Slurm hostlist under construction (hostlist_push_range semantics)."""

    def __init__(self):
        self.ranges = []

    def push_range(self, prefix, lo, hi, width):
        ranges = self.ranges
        if ranges:
            tail = ranges[-1]
            if (tail.hi == ((lo - 1) & _MASK64) and not tail.single and tail.prefix == prefix
                    and (tail.width == width or _width_equiv(tail.lo, tail.width, lo, width))):
                tail.hi = hi
                return
        ranges.append(_Range(prefix, lo, hi, width))

    def push_name(self, name):
        self.ranges.append(_Range(name, 0, 0, 0, True))

    def push_text(self, text):
        """Push one expression that needs the full parser (see _compress for plain names)."""
        _check_chars(text)
        for token in _tokens(text):
            _parse_token(text, token, self.push_range, self.push_name)


def _numstr(r):
    if r.lo < r.hi:
        return "%0*d-%0*d" % (r.width, r.lo, r.width, r.hi)
    return "%0*d" % (r.width, r.lo)


def _ranged_string(ranges):
    """Slurm's hostlist_ranged_string() for 1-D clusters."""
    out = []
    i = 0
    n = len(ranges)
    while i < n:
        r = ranges[i]
        if r.single:
            out.append(r.prefix)
            i += 1
            continue
        prefix = r.prefix
        j = i + 1
        while j < n and not ranges[j].single and ranges[j].prefix == prefix:
            j += 1
        if j - i == 1 and ((r.hi - r.lo + 1) & _MASK64) <= 1:
            # one host (or one of Slurm's emptied ranges, which print their start)
            out.append("%s%0*d" % (prefix, r.width, r.lo))
        else:
            out.append("%s[%s]" % (prefix, ",".join([_numstr(x) for x in ranges[i:j]])))
        i = j
    return ",".join(out)


# ------------------------------------------------------- hostlistsorted


def _natkey(text):
    """Sort key equal to Slurm's strnatcmp() order (Martin Pool's algorithm).

    Digit runs compare as a block: runs starting with '0' before other runs
    and among themselves character by character (shorter first); other runs
    by length, then value.  Other bytes compare as C (signed) chars, the end
    of the string as 0.
    """
    data = text.encode("utf-8", "surrogateescape")
    key = []
    n = len(data)
    i = 0
    while i < n:
        c = data[i]
        if 48 <= c <= 57:
            j = i + 1
            while j < n and 48 <= data[j] <= 57:
                j += 1
            run = data[i:j]
            if c == 48:
                key.append((48, 0, run))
            else:
                key.append((48, 1, j - i, run))
            i = j
        else:
            key.append((c - 256 if c >= 128 else c,))
            i += 1
    key.append((0,))
    return tuple(key)


_POW10 = [10 ** i for i in range(64)]


def _number_key(r):
    """Within one prefix, an int ordering ranges like hostrange_cmp() does
    while no number reaches 2**31: names without a number first, then by
    padding class (padded width w, or the digit count of an unpadded start),
    padded before unpadded of the same size, then by start."""
    if r.single:
        return -1
    width, lo = r.width, r.lo
    if width < 64:
        if width > 1 and lo < _POW10[width - 1]:
            return (width << 32) | lo
        if lo < _POW10[width]:
            return (width << 32) | (1 << 31) | lo
    return (_ndigits(lo) << 32) | (1 << 31) | lo


def _c_cmp(a, b, keys):
    """Slurm's hostrange_cmp(), including its int truncation of lo - lo."""
    ka, kb = keys[a.prefix], keys[b.prefix]
    if ka != kb:
        return -1 if ka < kb else 1
    if a.single != b.single:
        return int(b.single) - int(a.single)
    if a.single or _width_equiv(a.lo, a.width, b.lo, b.width):
        diff = (a.lo - b.lo) & 0xFFFFFFFF
        return diff - (1 << 32) if diff >= (1 << 31) else diff
    return a.width - b.width


def _glibc_msort(items, cmp):
    """glibc qsort() (a stable top-down merge sort), step for step."""
    n = len(items)
    if n <= 1:
        return list(items)
    n1 = n // 2
    left = _glibc_msort(items[:n1], cmp)
    right = _glibc_msort(items[n1:], cmp)
    out = []
    i = j = 0
    while i < len(left) and j < len(right):
        if cmp(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    out.extend(left[i:])
    out.extend(right[j:])
    return out


def _sort_ranges(ranges):
    """Slurm's qsort(hl->hr, ..., hostrange_cmp): glibc's stable merge sort."""
    groups = {}
    for r in ranges:
        group = groups.get(r.prefix)
        if group is None:
            groups[r.prefix] = [r]
        else:
            group.append(r)
    keys = {prefix: _natkey(prefix) for prefix in groups}
    limit = 1 << 31
    if all(r.lo < limit for r in ranges):
        # hostrange_cmp() is then a consistent total order, so any stable
        # sort gives glibc's result: prefixes in strnatcmp order (equal
        # prefix strings compare equal), then each group by its number key.
        out = []
        for prefix in sorted(groups, key=keys.__getitem__):
            group = groups[prefix]
            if len(group) > 1:
                numbers = [_number_key(r) for r in group]
                group = [group[i] for i in sorted(range(len(group)), key=numbers.__getitem__)]
            out.extend(group)
        return out
    return _glibc_msort(ranges, lambda a, b: _c_cmp(a, b, keys))


def _width_combine(a, b):
    """Slurm's hostrange_width_combine(), including its in-place width rewrite.

    During hostlist_coalesce() a range's low end can move (``n[999-1015]``
    becomes ``n1015``), after which the rewrite decides the padding of the
    single-number ranges Slurm inserts, so it is reproduced here.
    """
    wa, wb = a.width, b.width
    if wa == wb:
        return True
    da, db = _ndigits(a.lo), _ndigits(b.lo)
    a_same = (wa - da if wa > da else 0) == (wb - da if wb > da else 0)
    b_same = (wb - db if wb > db else 0) == (wa - db if wa > db else 0)
    if not a_same and not b_same:
        return False
    if not a_same:
        b.width = wa
    else:
        a.width = wb
    return True


def _split_overlap(h1, h2, emptied):
    """One step of hostlist_coalesce() on neighbours h1 (hprev), h2 (hnext).

    Returns what replaces the pair, in list order: hprev with its top cut
    to the start of the overlap, the overlap as single-number ranges, hnext
    starting at the end of the overlap.

    If hprev comes out empty (its start lies above hnext's start, which
    happens after an earlier step raised its start, or when numbers 2**31
    apart confuse Slurm's compare), Slurm deletes *hnext* instead of hprev
    and goes on reading the freed hnext.  What it reads depends on glibc's
    heap state: usually the freed memory is handed straight back to the next
    hostrange Slurm allocates ("reuse": each overlap number is inserted
    once), but when glibc's tcache bin is full the old values stay ("stale":
    numbers below the old end are inserted twice); it can differ from one
    such event to the next.  ``emptied`` is None to raise HostlistError
    there, or a callable returning "reuse" or "stale" for each event.
    """
    ilo = h2.lo
    ihi = h2.hi if h2.hi < h1.hi else h1.hi
    prefix, width = h1.prefix, h1.width
    old_lo = h1.lo
    if ihi < h1.hi:
        h2.hi = h1.hi
    h1.hi = ilo
    h2.lo = ihi
    hnext_deleted = h1.hi < h1.lo
    twice = True
    if hnext_deleted:
        if emptied is None:
            raise _SlurmSortBug(prefix, old_lo, ilo)
        twice = emptied() == "stale"
    out = [h1]
    for num in range(ilo, ihi + 1):
        if num > ilo:
            out.append(_Range(prefix, num, num, width))
        if num < ihi and twice:
            out.append(_Range(prefix, num, num, width))
    if not hnext_deleted:
        out.append(h2)
    return out


class _SlurmSortBug(Exception):
    def __init__(self, prefix, above, below):
        Exception.__init__(self, prefix, above, below)
        self.prefix, self.above, self.below = prefix, above, below


def _coalesce(ranges, emptied=None):
    """Slurm's hostlist_coalesce() without its quadratic rescans.

    Slurm checks neighbour pairs from the end; after each split it restarts
    from the end.  Pairs above the split are known not to overlap, so the
    next overlapping pair is found by pushing the split's output back onto
    the input and continuing: the pieces are re-checked top down against the
    processed part exactly in the order Slurm's rescan reaches them.
    """
    todo = list(ranges)
    pop = todo.pop
    done = []  # processed part, reversed: done[-1] has the lowest list position
    push = done.append
    while todo:
        h1 = pop()
        if done:
            h2 = done[-1]
            # hostrange_intersect(), same test order (the width test rewrites widths)
            if (h1.hi > h2.lo and not h1.single and not h2.single and h1.prefix == h2.prefix
                    and (h1.width == h2.width or _width_combine(h1, h2))):
                done.pop()
                todo.extend(_split_overlap(h1, h2, emptied))
                continue
        push(h1)
    done.reverse()
    return done


def _collapse(ranges):
    """Slurm's hostlist_collapse(): join neighbours, scanning from the end."""
    if not ranges:
        return []
    top = ranges[-1]
    out = [top]
    push = out.append
    for i in range(len(ranges) - 2, -1, -1):
        r = ranges[i]
        if (r.hi == top.lo - 1 and r.single == top.single and r.prefix == top.prefix
                and (r.width == top.width or _width_combine(r, top))):
            r.hi = top.hi
            out[-1] = r
        else:
            push(r)
        top = r
    out.reverse()
    return out


def _push_plain_names(ranges, names):
    """hostlist_push_host() + hostlist_push_range() for plain host names
    (no brackets, separators or control characters), inlined for speed."""
    digit_chars = _DIGITS
    new_range = _Range
    append = ranges.append
    tail = ranges[-1] if ranges else None
    for text in names:
        if not text:
            continue
        stem = text.rstrip(digit_chars)
        cut = len(stem)
        if cut == len(text):
            tail = new_range(text, 0, 0, 0, True)
            append(tail)
            continue
        num = int(text[cut:])
        width = len(text) - cut
        if num > MAX_NUMBER:
            _number(text, text, text[cut:])
        if (tail is not None and tail.hi == num - 1 and tail.prefix == stem and not tail.single
                and (tail.width == width or _width_equiv(tail.lo, tail.width, num, width))):
            tail.hi = num
        else:
            tail = new_range(stem, num, num, width)
            append(tail)


def _compress(names, sort, emptied=None):
    builder = _Builder()
    items = _inputs(names, "hostlist_compress")
    ranges = builder.ranges
    special = _SPECIAL.search
    plain = []
    for text in items:
        if not special(text):
            plain.append(text)
            continue
        if plain:
            _push_plain_names(ranges, plain)
            plain = []
        if "[" in text or "]" in text:
            builder.push_text(text)
        else:
            _check_chars(text)
            _push_plain_names(ranges, _tokens(text))
    if plain:
        _push_plain_names(ranges, plain)
    ranges = builder.ranges
    if sort and len(ranges) > 1:
        bug = None
        try:
            ranges = _collapse(_coalesce(_sort_ranges(ranges), emptied))
        except _SlurmSortBug as exc:
            bug = exc
        if bug is not None:
            raise HostlistError(
                "cannot sort hostlist %s the way Slurm does: Slurm's hostlistsorted breaks on "
                "it (after splitting overlapping %s ranges it meets %s%d sorted before %s%d, "
                "then drops or duplicates hosts depending on memory allocator state). This "
                "needs duplicate or overlapping ranges mixing zero paddings of one prefix, or "
                "numbers of one prefix 2**31 or more apart; remove the duplicates, use one "
                "zero padding per prefix, or compress without sorting"
                % (_show(",".join(items)), bug.prefix or "unprefixed", bug.prefix, bug.above,
                   bug.prefix, bug.below))
    return _ranged_string(ranges)


def compress(names, sort=False):
    """Compress host names (or expressions) to one hostlist expression.

    With ``sort=False`` the result is what ``scontrol show hostlist`` prints
    for the comma-joined input: order kept, only names that directly continue
    the previous range are merged.  With ``sort=True`` it is what
    ``scontrol show hostlistsorted`` prints (duplicates are kept, as in
    Slurm).  ``names`` is an iterable of strings, each a host name or a
    hostlist expression, or a single expression string.  Raises
    :class:`HostlistError` for invalid input, and for the rare sorted inputs
    on which Slurm's own sort misbehaves.
    """
    return _compress(names, sort)
