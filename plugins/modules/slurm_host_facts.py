#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_host_facts
short_description: Read what the first play needs from a host in one round trip (facts, Slurm's candidate version, slurm.conf)
description:
  - Gathers the host's facts with Ansible's own collectors, as C(ansible.builtin.setup) does with the same
    O(gather_subset), and returns them as C(ansible_facts); with O(filter), only the facts it names.
  - When O(filter) names only plain facts of the distribution, platform, package and service managers,
    virtualization, default addresses, processors, memory and C(local) (the roles' default) on Linux, only the
    collectors that make them are loaded and run; the same facts, for less of the host's CPU on every run.
  - On hosts whose package manager is apt, reads C(apt-cache policy) of O(apt_policy) (the index as it is), unless
    dpkg has every one of them installed; their installed versions are returned either way
    (RV(installed_versions)).
  - Reads O(file) when it exists, as C(ansible.builtin.slurp) does.
  - With O(dpkg_installed), lists every package dpkg knows on apt hosts (C(dpkg-query -W)), so that the roles tell
    whether their packages are installed without a round trip of their own.
  - Read-only. One module run where there were three (setup, a command and slurp), which saves two round trips
    per host on every run.
version_added: 0.3.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
options:
  gather_subset:
    description: The fact subsets, as for C(ansible.builtin.setup).
    type: list
    elements: str
    default: [min, hardware, virtual, network]
  gather_timeout:
    description: Seconds each fact collector may take, as for C(ansible.builtin.setup).
    type: int
    default: 10
  filter:
    description:
      - Return only the facts whose names match one of these shell-style (fnmatch) patterns, with or without the
        C(ansible_) prefix, as C(ansible.builtin.setup)'s O(ansible.builtin.setup#module:filter) does. An empty list
        returns every fact gathered.
      - Every task of the run carries each host's facts (Ansible copies and wraps them per host and task), so a
        play that reads a few facts runs faster keeping only those; a compute node's devices and mounts are most
        of its facts.
      - When no pattern keeps C(mounts), the mount facts are not even read (findmnt and a statvfs of every mount,
        most of the C(hardware) subset's time).
    type: list
    elements: str
    default: []
  apt_policy:
    description:
      - Packages whose C(apt-cache policy) to read on apt hosts; none read when empty.
      - When dpkg has all of them installed, C(apt-cache) is not run (it opens the whole package cache, about 60 ms
        of the host's CPU); their installed versions are in RV(installed_versions).
    type: list
    elements: str
    default: []
  file:
    description: A file to read (its content is returned base64-encoded).
    type: path
  dpkg_installed:
    description: List the packages dpkg knows, with their status, on apt hosts.
    type: bool
    default: false
  paths:
    description:
      - Paths that must exist on this host (the device files gres.conf names for it); those that do not are
        returned in RV(paths_missing).
    type: list
    elements: path
    default: []
  users:
    description:
      - User names to resolve through the host's name service, as C(getent passwd) does (local files, SSSD, LDAP);
        their ids are returned in RV(users), so the first play can tell that each resolves to one uid on every host.
    type: list
    elements: str
    default: []
    version_added: 0.4.0
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Facts, the Slurm version apt would install, and the current slurm.conf
  hybridhpc.slurm.slurm_host_facts:
    apt_policy: [slurm-client]
    file: /etc/slurm/slurm.conf
    filter: [distribution*, os_family, pkg_mgr, processor_*, memtotal_mb, default_ipv4, local]
  register: host_read
"""

RETURN = r"""
ansible_facts:
  description: The host's facts, as C(ansible.builtin.setup) returns them for O(gather_subset) and O(filter).
  returned: always
  type: dict
apt_policy:
  description:
    - C(apt-cache policy) of O(apt_policy); empty when not read (not apt, no package asked, or all of them
      installed).
  returned: always
  type: str
installed_versions:
  description: The packages of O(apt_policy) that dpkg has installed, each with its version (empty when not apt).
  returned: always
  type: dict
  sample: {"slurm-client": "24.11.5-4+deb13u1"}
dpkg_installed:
  description:
    - C(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n') over every package dpkg knows (C(ii) when installed).
    - Empty when not asked or not an apt host.
  returned: always
  type: str
paths_missing:
  description: The paths of O(paths) that do not exist here.
  returned: always
  type: list
  elements: str
users:
  description: Each name of O(users) with its C([uid, gid]), or null where the name service does not know it.
  returned: always
  type: dict
  sample: {"alice": [20001, 20001], "carol": null}
file:
  description: O(file) as read.
  returned: when O(file) is given
  type: dict
  contains:
    exists:
      description: Whether it exists and could be read.
      type: bool
    content:
      description: Its content, base64-encoded (empty when it does not exist).
      type: str
"""

import base64
import contextlib
import fnmatch
import os
import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import lean_facts
from ansible_collections.hybridhpc.slurm.plugins.module_utils.user_ids import resolve as user_ids

# The format module_utils/host_packages.missing() reads (a test keeps the two
# equal): not imported, so that the module ships without the planning code.
DPKG_QUERY_FORMAT = "${db:Status-Abbrev} ${Package}\n"
# What installed_versions() reads: status, version and name, tab-separated.
DPKG_VERSION_FORMAT = "${db:Status-Abbrev}\t${Version}\t${Package}\n"

# setup's own minimal subset (ansible.builtin.setup): what "min" means.
MINIMAL_GATHER_SUBSET = frozenset(["apparmor", "caps", "cmdline", "date_time", "distribution", "dns", "env", "fips",
                                   "local", "lsb", "pkg_mgr", "platform", "python", "selinux", "service_mgr",
                                   "ssh_pub_keys", "user"])


@contextlib.contextmanager
def mounts_only_when_kept(filter_spec, linux_hardware):
    """Skip the mount facts while gathering when O(filter) drops them anyway.

    Ansible's hardware collector always reads them: findmnt, then a statvfs of
    every mount in a thread pool, most of the subset's time (0.2 s of a 0.25 s
    subset on a lab node) for facts the filter then throws away.
    """
    kept = not filter_spec or any(fnmatch.fnmatch(name, pattern)
                                  for pattern in filter_spec for name in ("mounts", "ansible_mounts"))
    hardware = getattr(linux_hardware, "LinuxHardware", None)
    if kept or hardware is None or not hasattr(hardware, "get_mount_facts"):
        yield
        return
    original = hardware.get_mount_facts
    hardware.get_mount_facts = lambda self: {}
    try:
        yield
    finally:
        hardware.get_mount_facts = original


def gather(module):
    """The facts, as setup gives them for the same subset and filter.

    When the filter asks only facts module_utils/lean_facts.py knows, only the
    collectors that make them are imported and run (on Linux); else all of
    Ansible's, as setup does (imported here, not when the module loads).
    """
    names = lean_facts.collectors_for(module.params["filter"], module.params["gather_subset"])
    if names is not None and platform.system() == "Linux":
        facts = lean_facts.gather(module, names, module.params["filter"], module.params["gather_timeout"])
        if facts is not None:
            return facts
    from ansible.module_utils.facts import ansible_collector, default_collectors
    from ansible.module_utils.facts.hardware import linux as linux_hardware
    from ansible.module_utils.facts.namespace import PrefixFactNamespace
    try:
        collector = ansible_collector.get_ansible_collector(
            all_collector_classes=default_collectors.collectors,
            namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
            filter_spec=module.params["filter"],
            gather_subset=module.params["gather_subset"],
            gather_timeout=module.params["gather_timeout"],
            minimal_gather_subset=MINIMAL_GATHER_SUBSET,
        )
    except Exception as exc:  # noqa: BLE001 -- setup reports a bad subset the same way
        module.fail_json(msg="gather_subset: %s" % exc)
    with mounts_only_when_kept(module.params["filter"], linux_hardware):
        return collector.collect(module=module)


def installed_versions(module, packages):
    """``{package: version}`` for those of ``packages`` dpkg has installed (status ``?i``, held or not).

    dpkg-query exits 1 when it knows one of them not at all, and still prints the others."""
    rc, out, err = module.run_command(["dpkg-query", "-W", "-f", DPKG_VERSION_FORMAT] + list(packages),
                                      environ_update={"LC_ALL": "C"})
    if rc not in (0, 1):
        module.fail_json(msg="dpkg-query failed (rc %d): %s" % (rc, (err or out).strip()))
    found = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and len(fields[0]) >= 2 and fields[0][1] == "i" and fields[1] and fields[2] in packages:
            found[fields[2]] = fields[1]
    return found


def read_file(path):
    """path's content base64-encoded, as slurp returns it."""
    try:
        with open(path, "rb") as handle:
            return {"exists": True, "content": base64.b64encode(handle.read()).decode("ascii")}
    except (IOError, OSError):
        return {"exists": False, "content": ""}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gather_subset=dict(type="list", elements="str", default=["min", "hardware", "virtual", "network"]),
            gather_timeout=dict(type="int", default=10),
            filter=dict(type="list", elements="str", default=[]),
            apt_policy=dict(type="list", elements="str", default=[]),
            file=dict(type="path"),
            dpkg_installed=dict(type="bool", default=False),
            paths=dict(type="list", elements="path", default=[]),
            users=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    facts = gather(module)
    result = dict(changed=False, ansible_facts=facts, apt_policy="", installed_versions={}, dpkg_installed="")
    apt = facts.get("ansible_pkg_mgr") == "apt"
    if module.params["apt_policy"] and apt:
        result["installed_versions"] = installed_versions(module, module.params["apt_policy"])
    # An installed package says which major runs and that it is available: the index only matters for one that is not.
    if apt and set(module.params["apt_policy"]) - set(result["installed_versions"]):
        rc, out, err = module.run_command(["apt-cache", "policy"] + module.params["apt_policy"],
                                          environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg="apt-cache policy failed (rc %d): %s" % (rc, (err or out).strip()))
        result["apt_policy"] = out
    if module.params["dpkg_installed"] and apt:
        rc, out, err = module.run_command(["dpkg-query", "-W", "-f", DPKG_QUERY_FORMAT])
        if rc != 0:
            module.fail_json(msg="dpkg-query failed (rc %d): %s" % (rc, (err or out).strip()))
        result["dpkg_installed"] = out
    if module.params["file"]:
        result["file"] = read_file(module.params["file"])
    result["paths_missing"] = [path for path in module.params["paths"] if not os.path.exists(path)]
    result["users"] = {name: user_ids(name) for name in module.params["users"]}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
