# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm majors and the in-place upgrades Slurm supports."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_versions as sv


@pytest.mark.parametrize("version, expected", [
    ("24.11.5-4+deb13u1", "24.11"), ("1:26.05.5-1", "26.05"), ("22.05.8-4+deb12u3", "22.05"), ("23.11", "23.11"),
])
def test_major_of_package_versions(version, expected):
    assert sv.major(version) == expected


def test_major_refuses_what_is_no_version():
    with pytest.raises(ValueError, match="not a Slurm version"):
        sv.major("latest")


def test_sequence_round_trips_across_the_cycle_change():
    for index in range(30):
        assert sv.major_index(sv.major_at(index)) == index
    assert [sv.major_at(i) for i in range(7, 13)] == ["22.05", "23.02", "23.11", "24.05", "24.11", "25.05"]
    with pytest.raises(ValueError):
        sv.major_index("24.08")


def test_windows_from_the_upgrade_guide():
    assert sv.upgrades_from("24.11") == ["23.02", "23.11", "24.05"]  # 24.11's RELEASE_NOTES
    assert sv.upgrades_from("25.11") == ["24.05", "24.11", "25.05"]  # the guide's example
    assert sv.upgrades_from("26.05") == ["24.11", "25.05", "25.11"]
    assert sv.upgrades_from("24.05") == ["23.02", "23.11"]  # two before 24.11
    assert sv.upgrades_from("22.05") == ["20.11", "21.08"]  # 22.05's RELEASE_NOTES


def test_supported_upgrades_and_same_major():
    assert sv.upgrade_problem("24.11.5-4+deb13u1", "26.05.5-1") is None
    assert sv.upgrade_problem("24.11.5-4", "24.11.7-1") is None
    assert sv.upgrade_problem("23.02.7", "24.11.1") is None


def test_too_long_a_jump_names_the_steps():
    problem = sv.upgrade_problem("22.05.8-4+deb12u3", "26.05.5-1")
    assert "skips more majors than Slurm supports" in problem
    assert "26.05 upgrades in place only from 24.11, 25.05, 25.11" in problem
    assert problem.endswith("22.05 -> 23.11 -> 25.05 -> 26.05")


def test_downgrade_is_refused():
    assert "downgrade" in sv.upgrade_problem("26.05.5-1", "24.11.5-4")


def test_apt_simulation_is_read():
    out = ("Reading package lists...\n"
           "Inst slurmctld [24.11.5-4+deb13u1] (26.05.5-1 Debian:unstable [amd64]) []\n"
           "Inst slurm-client [24.11.5-4+deb13u1] (26.05.5-1 Debian:unstable [amd64])\n"
           "Conf slurmctld (26.05.5-1 Debian:unstable [amd64])\n")
    out += "Inst libhwloc15 [2.12.0-4] (2.15.0-2 Debian:unstable [amd64]) []\n"
    assert sv.apt_planned(out, ["slurmctld", "slurm-client"]) == {
        "slurmctld": ("24.11.5-4+deb13u1", "26.05.5-1"), "slurm-client": ("24.11.5-4+deb13u1", "26.05.5-1")}
    assert sv.apt_planned(out)["libhwloc15"] == ("2.12.0-4", "2.15.0-2")


def test_site_plan_refuses_a_skip_and_mixed_targets():
    ok = {"ctl": {"slurmctld": ("24.11.5-4", "26.05.5-1")}, "c1": {"slurmd": ("24.11.5-4", "26.05.5-1")}}
    assert sv.upgrade_plan_problems(ok) == []
    old = dict(ok, c2={"slurmd": ("22.05.8-4", "26.05.5-1")})
    assert any(p.startswith("c2: package slurmd 22.05.8-4 -> 26.05.5-1") for p in sv.upgrade_plan_problems(old))
    mixed = dict(ok, c3={"slurmd": ("24.11.5-4", "25.05.1-1")})
    assert any("different majors" in p for p in sv.upgrade_plan_problems(mixed))
