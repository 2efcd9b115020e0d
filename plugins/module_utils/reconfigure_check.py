# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether slurmctld took a new configuration: read from its own log and its node records.

``scontrol reconfigure`` returns 0 even when slurmctld rejects the new files
(it logs ``fatal: ...`` then ``Resuming operation, reconfigure failed`` and
keeps the old ones), so the run reads what slurmctld wrote since the
reconfigure, and the nodes' records, and calls the change applied only when
neither says otherwise. The slurm_reconfigure module runs the commands.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Lines of slurmctld's log that say the new configuration was not taken.
REJECTED = re.compile(
    r"fatal[:\s]|reconfigure failed|Unable to process configuration file|Parse error|"
    r"appears to have a different slurm\.conf|error: .*\bslurm\.conf\b.*(?:invalid|unknown|not)",
    re.I,
)
# Lines that are no failure but that the inventory should not cause.
WARNED = re.compile(r"\bdefunct\b|\bdeprecated\b", re.I)
# Node states and reasons that say a node does not run what slurmctld has for it.
NODE_REJECTED_STATE = re.compile(r"\bINVAL\b|\bINVALID_REG\b")
NODE_REJECTED_REASON = re.compile(r"different slurm\.conf|reported lower than configured|configured .* differs", re.I)


# What scontrol prints when slurmctld's reply was lost, not the change refused:
# a busy slurmctld (re-executing for the reconfigure on a loaded host) answers
# after scontrol's MessageTimeout. Its log and its next answer then decide.
REPLY_LOST = re.compile(
    r"Socket timed out on send/recv|Zero Bytes were transmitted or received|Unable to contact slurm controller|"
    r"Connection refused|Communication connection failure",
    re.I,
)


def command_rejected(action, rc, output):
    """The lines that say the reconfigure or restart command itself failed: [] when it ran, or when only its reply
    was lost (REPLY_LOST)."""
    output = (output or "").strip()
    if rc == 0 or (action == "reconfigure" and REPLY_LOST.search(output)):
        return []
    return ["%s: %s" % (action, output)]


def log_verdict(text):
    """``(rejected lines, warned lines)`` of the log written since the reconfigure."""
    rejected, warned = [], []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        if REJECTED.search(line):
            rejected.append(line)
        elif WARNED.search(line):
            warned.append(line)
    return rejected, warned


def answered(ping_output):
    """Whether ``scontrol ping`` says a slurmctld of this cluster is UP."""
    return bool(re.search(r"\bis UP\b", ping_output or ""))


def parse_nodes(show_node_output):
    """``{node: {field: value}}`` from ``scontrol show node -o`` (one line per node; Reason runs to its end)."""
    nodes = {}
    for line in (show_node_output or "").splitlines():
        match = re.match(r"NodeName=(\S+)", line.strip())
        if not match:
            continue
        fields = {}
        head, _sep, reason = line.partition(" Reason=")
        for token in head.split():
            key, sep, value = token.partition("=")
            if sep:
                fields[key] = value
        if reason:
            fields["Reason"] = reason.strip()
        nodes[match.group(1)] = fields
    return nodes


def node_problems(nodes):
    """One line per node whose record says it does not run the configuration slurmctld has for it."""
    problems = []
    for name, fields in sorted(nodes.items()):
        state = fields.get("State", "")
        reason = fields.get("Reason", "")
        if NODE_REJECTED_STATE.search(state) or NODE_REJECTED_REASON.search(reason):
            problems.append("node %s: State=%s%s" % (name, state, (" Reason=" + reason) if reason else ""))
    return problems


def changed_lines(accepted, rejected):
    """The lines of the rejected file that the accepted one does not have: what the run tried to change."""
    kept = set((accepted or "").splitlines())
    return [line for line in (rejected or "").splitlines() if line.strip() and line not in kept]


def controller_up(ping_output, host):
    """Whether ``scontrol ping`` says the slurmctld on ``host`` (its SlurmctldHost name) is UP.

    None when the output has no line for that host (not one of the cluster's controllers by that name).
    """
    for match in re.finditer(r"Slurmctld\(\w+\) at (\S+) is (\w+)", ping_output or ""):
        if match.group(1) == host:
            return match.group(2) == "UP"
    return None
