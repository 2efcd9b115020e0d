"""Host lists in roles keep the inventory's order.

Ansible's ``intersect`` filter goes through a set when it can, so its order
changes from one run to the next (string hashes are salted per process). A host
list built with it reorders slurm.conf's node lines (a change, a reconfigure,
no idempotence) and can swap which controller is primary. Roles select with
``select('in', ...)`` instead, which keeps the order of the first list.
"""

import pathlib
import re

from ansible.template import Templar
from templating import trusted

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_no_role_or_playbook_builds_a_host_list_with_intersect():
    offenders = [
        "%s:%d" % (path.relative_to(ROOT), number)
        for folder in ("roles", "playbooks")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".yml", ".yaml", ".j2")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\|\s*intersect\(", line)
    ]
    assert offenders == []


def test_select_in_keeps_the_first_lists_order():
    hosts = ["c%d" % i for i in range(30, 0, -1)]
    templar = Templar(loader=None, variables={"a": hosts, "b": list(reversed(hosts))[:20]})
    assert templar.template(trusted("{{ a | select('in', b) | list }}")) == [h for h in hosts if h in hosts[10:]]


def test_no_role_or_playbook_uses_run_once():
    """run_once acts once per play, for its first host: in a play over several
    clusters' hosts that is one cluster. Per-cluster actions pick the cluster's
    own controller (filter slurm_cluster_actions); site-wide ones an explicit host."""
    offenders = [
        "%s:%d" % (path.relative_to(ROOT), number)
        for folder in ("roles", "playbooks", "extensions")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".yml", ".yaml")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.match(r"^\s*(-\s+)?run_once\s*:", line)
    ]
    assert offenders == []
