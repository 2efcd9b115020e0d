# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare module_utils/hostlist.py with a real scontrol (lab).

Runs tests/integration/hostlist_vs_scontrol.py against the container named in
HYBRIDHPC_SCONTROL_CONTAINER: 300 random expressions plus the 10,000+ name
lists, each through ``scontrol show hostnames|hostlist|hostlistsorted``.
HYBRIDHPC_HOSTLIST_SEED picks another random seed (default fixed, so CI runs
are repeatable).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("hostlist_vs_scontrol.py")
CONTAINER = os.environ.get("HYBRIDHPC_SCONTROL_CONTAINER")
CASES = 300
LARGE_CASES = 7  # the 10,000+ name lists the script always adds


@pytest.mark.lab
@pytest.mark.skipif(
    not CONTAINER,
    reason="HYBRIDHPC_SCONTROL_CONTAINER is not set (name of a running container with "
    "Slurm 24.11's scontrol and an /etc/slurm/slurm.conf, e.g. hl-probe)",
)
def test_hostlist_matches_real_scontrol():
    seed = os.environ.get("HYBRIDHPC_HOSTLIST_SEED", "2411")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--exec", "docker exec " + shlex.quote(CONTAINER),
         "--cases", str(CASES), "--seed", seed],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=1800, check=False,
    )
    report = proc.stdout[-6000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    match = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1]) if lines else None
    assert match, report
    passed, failed = int(match.group(1)), int(match.group(2))
    assert failed == 0 and proc.returncode == 0, report
    assert passed >= CASES + LARGE_CASES, report
