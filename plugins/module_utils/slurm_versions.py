# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm majors and which in-place upgrades Slurm supports between them.

Facts (SchedMD's upgrade guide and the RELEASE_NOTES of each major):

* A version is ``MAJOR.MINOR.PATCH`` where the major (``24.11``) is the year
  and month of its release. Majors came every 9 months up to 23.11 (17.02,
  17.11, 18.08, 19.05, 20.02, 20.11, 21.08, 22.05, 23.02, 23.11), every 6
  months from 24.05 on (24.05, 24.11, 25.05, 25.11, 26.05, ...).
* Slurm upgrades in place, without losing jobs or state, from the previous
  two majors; from 24.11 on, from the previous three (24.11 accepts 23.02,
  23.11 and 24.05; 26.05 accepts 24.11, 25.05 and 25.11). Upgrading from an
  older major loses the controllers' state; a downgrade is not supported.
* Distribution package versions carry an epoch and a revision
  (``1:24.11.5-4+deb13u1``, ``26.05.5-1``); only the upstream part counts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Majors of the 9-month cycle, oldest first; from 24.05 on every YY.05 and YY.11.
NINE_MONTH_MAJORS = ("17.02", "17.11", "18.08", "19.05", "20.02", "20.11", "21.08", "22.05", "23.02", "23.11")
SIX_MONTH_FIRST_YEAR = 24
# The first major that upgrades from the previous three (before it: two).
THREE_MAJORS_FROM = "24.11"

_VERSION_RE = re.compile(r"^(?:\d+:)?(\d{2})\.(\d{2})(?:\.(\d+))?")
_APT_INST_RE = re.compile(r"^Inst (\S+) \[([^\]]+)\] \((\S+)")


def major(version):
    """The major of a Slurm or package version: ``"1:24.11.5-4+deb13u1"`` -> ``"24.11"``.

    Raises ``ValueError`` for a version that does not start with ``YY.MM``.
    """
    match = _VERSION_RE.match(str(version or "").strip())
    if not match:
        raise ValueError("%r is not a Slurm version (YY.MM or YY.MM.P, e.g. 24.11.5)" % (version,))
    return "%s.%s" % (match.group(1), match.group(2))


def major_index(name):
    """Position of a major in Slurm's release sequence (0 = 17.02).

    Raises ``ValueError`` for a name that is no Slurm major (e.g. 24.08).
    """
    if name in NINE_MONTH_MAJORS:
        return NINE_MONTH_MAJORS.index(name)
    year, month = (int(part) for part in name.split("."))
    if year >= SIX_MONTH_FIRST_YEAR and month in (5, 11):
        return len(NINE_MONTH_MAJORS) + (year - SIX_MONTH_FIRST_YEAR) * 2 + (0 if month == 5 else 1)
    raise ValueError("%s is not a Slurm major release" % name)


def major_at(index):
    """The major at a position of the sequence (inverse of major_index)."""
    if index < len(NINE_MONTH_MAJORS):
        return NINE_MONTH_MAJORS[index]
    offset = index - len(NINE_MONTH_MAJORS)
    return "%02d.%s" % (SIX_MONTH_FIRST_YEAR + offset // 2, "05" if offset % 2 == 0 else "11")


def upgrades_from(target):
    """The majors ``target`` upgrades from in place, oldest first (the target itself excluded)."""
    index = major_index(target)
    window = 3 if index >= major_index(THREE_MAJORS_FROM) else 2
    return [major_at(i) for i in range(max(index - window, 0), index)]


def upgrade_problem(current, target):
    """Why upgrading Slurm from ``current`` to ``target`` (versions) is not supported, or ``None``."""
    have, want = major(current), major(target)
    if have == want:
        return None
    if major_index(want) < major_index(have):
        return ("a downgrade from %s to %s: Slurm does not support going back to an older major "
                "(restore the backups of the accounting database and StateSaveLocation instead)" % (have, want))
    allowed = upgrades_from(want)
    if have in allowed:
        return None
    steps = []
    index = major_index(have)
    while index < major_index(want):
        # The furthest major the current one may jump to.
        nxt = max(i for i in range(index + 1, major_index(want) + 1) if major_at(index) in upgrades_from(major_at(i)))
        steps.append(major_at(nxt))
        index = nxt
    return ("%s to %s skips more majors than Slurm supports: %s upgrades in place only from %s "
            "(SchedMD's upgrade guide; older state is lost). Upgrade in steps: %s"
            % (have, want, want, ", ".join(allowed), " -> ".join([have] + steps)))


def apt_planned(stdout, packages=None):
    """``{package: (installed, candidate)}`` from apt's simulation (check mode) output: ``Inst pkg [old] (new ...)``.

    ``packages``: only these (the Slurm packages; the libraries an upgrade
    pulls along have versions of their own).
    """
    planned = {}
    for line in (stdout or "").splitlines():
        match = _APT_INST_RE.match(line.strip())
        if match and (packages is None or match.group(1) in packages):
            planned[match.group(1)] = (match.group(2), match.group(3))
    return planned


def upgrade_plan_problems(hosts):
    """Problems of a site's pending upgrade, before any change.

    ``hosts`` maps a host to ``{package: (installed, candidate)}``. Every
    host's Slurm packages must go to the same major, in one supported step.
    """
    problems = []
    targets = {}
    for host in sorted(hosts):
        for package, (installed, candidate) in sorted((hosts[host] or {}).items()):
            try:
                problem = upgrade_problem(installed, candidate)
                targets.setdefault(major(candidate), []).append(host)
            except ValueError as exc:
                problems.append("%s: package %s: %s" % (host, package, exc))
                continue
            if problem:
                problems.append("%s: package %s %s -> %s: %s" % (host, package, installed, candidate, problem))
                break
    if len(targets) > 1:
        problems.append(
            "the hosts would end on different majors (%s): the repositories differ between hosts; give every host "
            "the same Slurm source, or set slurm_upgrade_version"
            % "; ".join("%s on %s" % (m, ", ".join(sorted(set(h)))) for m, h in sorted(targets.items())))
    return problems
