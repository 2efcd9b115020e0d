#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_federation
short_description: Manage a Slurm federation and its member clusters with sacctmgr
description:
  - Creates, updates or deletes a Slurm federation (a group of clusters that
    schedule jobs together) in the accounting database (slurmdbd) through
    C(sacctmgr), idempotently.
  - Reads the federation with C(sacctmgr show federation), compares its
    member clusters and flags with the wanted ones and runs C(sacctmgr
    add/modify/delete federation) only when something differs. In check mode
    nothing is written and RV(commands) lists what would run.
  - A cluster can be in only one federation. Before a cluster joins, the
    module reads it with C(sacctmgr show cluster) and fails when the
    accounting database does not know it or when it is in another
    federation (C(sacctmgr) itself would silently move it).
version_added: 0.1.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.sacctmgr
options:
  name:
    description:
      - Name of the federation.
      - Slurm stores federation names in lower case; an upper-case name is
        lower-cased with a warning.
      - Letters, digits, V(_) and V(-), starting with a letter or a digit.
    type: str
    required: true
  state:
    description:
      - V(present) creates the federation when missing and sets its member
        O(clusters) and O(flags).
      - V(absent) deletes the federation; its clusters stay in the accounting
        database, in no federation. O(clusters) and O(flags) are ignored.
    type: str
    choices: [present, absent]
    default: present
  clusters:
    description:
      - Member clusters of the federation, as C(ClusterName) in
        C(slurm.conf). Compared and written in lower case.
      - Every cluster that joins must already exist in the accounting
        database (add it with O(cluster_features), with
        M(hybridhpc.slurm.slurm_cluster) or by starting its slurmctld) and
        must not be in another federation.
      - With O(clusters_mode=set), an empty list removes every member.
      - When not given, the members are left as they are.
      - Removing a cluster does not wait for its federated jobs; to let them
        finish first, set the cluster's fedstate to V(DRAIN+REMOVE) with
        M(hybridhpc.slurm.slurm_cluster) instead, and Slurm removes it from
        the federation once they have ended.
    type: list
    elements: str
  clusters_mode:
    description:
      - V(set) makes the members exactly O(clusters).
      - V(add) adds O(clusters) and keeps the other members.
      - V(remove) removes O(clusters) and keeps the other members.
    type: str
    choices: [set, add, remove]
    default: set
  flags:
    description:
      - Federation flags.
      - Slurm (checked up to 24.11) defines no federation flags; C(sacctmgr)
        rejects every flag name. The only value that can be used is an empty
        list, which makes sure no flag is set. Any flag name fails before
        C(sacctmgr) runs.
      - When not given, the flags are left as they are.
    type: list
    elements: str
  cluster_features:
    description:
      - Clusters to register before the federation is written, each mapped to its features. A cluster the
        accounting database does not know is added, and its features are set to exactly the list given (left as they
        are for V(null)), as M(hybridhpc.slurm.slurm_cluster) does with
        O(hybridhpc.slurm.slurm_cluster#module:features_mode=set). One module run where a loop over
        M(hybridhpc.slurm.slurm_cluster) took one per cluster.
      - Ignored with O(state=absent).
    type: dict
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
notes:
  - The whole member list is written with C(sacctmgr modify federation where
    name=NAME set clusters=a,b) (also for O(clusters_mode=add) and
    O(clusters_mode=remove)), and only when it differs from the current one.
  - Each slurmctld learns the federation from slurmdbd; C(FederationParameters)
    in C(slurm.conf) and C(scontrol show federation) are outside this module.
seealso:
  - module: hybridhpc.slurm.slurm_cluster
  - name: sacctmgr manual
    description: Federation specifications and format options of sacctmgr.
    link: https://slurm.schedmd.com/sacctmgr.html
  - name: Slurm federated scheduling
    description: How clusters, features and federation states work together.
    link: https://slurm.schedmd.com/federation.html
"""

EXAMPLES = r"""
- name: Register alpha (features gpu) and beta, then federate exactly them
  hybridhpc.slurm.slurm_federation:
    name: hpcfed
    clusters: [alpha, beta]
    cluster_features: {alpha: [gpu], beta: null}

- name: Federate exactly alpha and beta
  hybridhpc.slurm.slurm_federation:
    name: hpcfed
    clusters: [alpha, beta]

- name: Add gamma, keep the other members
  hybridhpc.slurm.slurm_federation:
    name: hpcfed
    clusters: [gamma]
    clusters_mode: add

- name: Take beta out of the federation
  hybridhpc.slurm.slurm_federation:
    name: hpcfed
    clusters: [beta]
    clusters_mode: remove

- name: Let beta drain its federated jobs and leave by itself instead
  hybridhpc.slurm.slurm_cluster:
    name: beta
    fedstate: DRAIN+REMOVE

- name: Create an empty federation (members are left alone when clusters is omitted)
  hybridhpc.slurm.slurm_federation:
    name: testfed

- name: Delete the federation
  hybridhpc.slurm.slurm_federation:
    name: hpcfed
    state: absent
"""

RETURN = r"""
federation:
  description:
    - The federation as C(sacctmgr show federation) reports it after the run
      (as it would be, in check mode). Empty when the federation is absent.
  returned: always
  type: dict
  contains:
    name:
      description: Federation name (lower case).
      type: str
      sample: hpcfed
    clusters:
      description: Sorted names of the member clusters.
      type: list
      elements: str
      sample: [alpha, beta]
    flags:
      description: Federation flags; empty when none (Slurm 24.11 defines none).
      type: list
      elements: str
      sample: []
    members:
      description: The member clusters, sorted by name.
      type: list
      elements: dict
      contains:
        name:
          description: Cluster name.
          type: str
        id:
          description:
            - ID of the cluster in the federation (unique among its members,
              part of federated job IDs).
            - V(null) in check mode for a cluster that would join.
          type: int
        fed_state:
          description: State of the cluster in the federation (C(ACTIVE) after joining).
          type: str
        features:
          description: Sorted cluster features.
          type: list
          elements: str
  sample:
    name: hpcfed
    clusters: [alpha, beta]
    flags: []
    members:
      - {name: alpha, id: 1, fed_state: ACTIVE, features: [gpu]}
      - {name: beta, id: 2, fed_state: ACTIVE, features: []}
commands:
  description:
    - The C(sacctmgr) commands run, as argument lists; in check mode, the
      commands that would run. Empty when nothing needed to change.
  returned: always
  type: list
  elements: list
  sample:
    - [/usr/bin/sacctmgr, --immediate, modify, federation, where, name=hpcfed, set, "clusters=alpha,beta"]
diff:
  description: Federation members and flags before and after, when run with C(--diff).
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: The federation before the run.
      type: dict
    after:
      description: The federation after the run (expected, in check mode).
      type: dict
  sample:
    before: {name: hpcfed, state: present, clusters: [alpha], flags: []}
    after: {name: hpcfed, state: present, clusters: [alpha, beta], flags: []}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    CLUSTERS_MODES,
    apply_plan,
    ensure_cluster,
    federation_joining_clusters,
    get_cluster,
    get_federation,
    plan_federation,
    run_module,
    sacctmgr_argument_spec,
    validate_federation_name,
)


def diff_view(name, federation):
    """The part of a federation shown in --diff output."""
    if federation is None:
        return {"name": name, "state": "absent"}
    return {
        "name": federation["name"],
        "state": "present",
        "clusters": list(federation["clusters"]),
        "flags": list(federation["flags"]),
    }


def ensure_federation(runner, params, check_mode=False, diff=False):
    """Bring the federation to the wanted state; return the module result.

    read -> look up joining clusters -> plan -> nothing to do? return ->
    check mode? report -> apply -> re-read. Raises ``ValueError`` for
    requests Slurm cannot satisfy and ``SacctmgrError`` when sacctmgr fails.
    """
    warnings = []
    name = validate_federation_name(params["name"])
    if name != params["name"]:
        warnings.append(
            "federation name {!r} is stored by Slurm in lower case as {!r}".format(params["name"], name)
        )
    state = params.get("state") or "present"
    clusters = params.get("clusters")
    clusters_mode = params.get("clusters_mode") or "set"
    flags = params.get("flags")
    if state == "present" and clusters is not None:
        upper = sorted(c for c in clusters if isinstance(c, str) and c != c.lower())
        if upper:
            warnings.append(
                "cluster names {} are stored by Slurm in lower case".format(", ".join(upper))
            )

    # First the clusters to register: a cluster must be known before it joins.
    registered, cluster_commands, clusters_changed = {}, [], False
    if state == "present":
        for cluster, features in sorted((params.get("cluster_features") or {}).items()):
            outcome = ensure_cluster(runner, {"name": cluster, "state": "present", "features": features,
                                              "features_mode": "set"}, check_mode=check_mode)
            registered[outcome["cluster"]["name"]] = outcome["cluster"]
            cluster_commands += outcome["commands"]
            clusters_changed = clusters_changed or outcome["changed"]
            warnings += outcome["warnings"]

    before = get_federation(runner, name)
    views = {}
    if state == "present":
        for cluster in federation_joining_clusters(before, clusters, clusters_mode):
            # In check mode a cluster registered above is only planned: its planned view.
            views[cluster] = registered[cluster] if cluster in registered else get_cluster(runner, cluster)
    plan = plan_federation(
        before,
        name,
        state=state,
        clusters=clusters,
        clusters_mode=clusters_mode,
        flags=flags,
        cluster_views=views,
    )
    changed, commands, after = apply_plan(runner, plan, check_mode, lambda: get_federation(runner, name))

    result = {
        "changed": changed or clusters_changed,
        "federation": after if after is not None else {},
        "commands": cluster_commands + commands,
        "warnings": warnings,
    }
    if diff:
        result["diff"] = {"before": diff_view(name, before), "after": diff_view(name, after)}
    return result


def main():
    argument_spec = sacctmgr_argument_spec()
    argument_spec.update(
        name={"type": "str", "required": True},
        state={"type": "str", "default": "present", "choices": ["present", "absent"]},
        clusters={"type": "list", "elements": "str"},
        clusters_mode={"type": "str", "default": "set", "choices": list(CLUSTERS_MODES)},
        flags={"type": "list", "elements": "str"},
        cluster_features={"type": "dict"},
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    run_module(module, ensure_federation)


if __name__ == "__main__":
    main()
