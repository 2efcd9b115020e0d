#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_config_files
short_description: Write every configuration file of a host in one step, say what the daemons must do, and run one
description:
  - Creates or fixes the system accounts of O(accounts) first (their owners), then creates the directories, then
    writes each file whose content or attributes differ (atomically), in one round trip instead of one template
    task per file.
  - With O(slurm_conf), tells a change that needs a daemon restart from one that C(scontrol reconfigure) applies,
    by comparing the old and the new slurm.conf.
  - With O(markers_dir), records that decision in marker files that survive a failed run, and reports the
    markers left by an earlier one; the daemon roles remove them once the restart or reconfigure happened.
  - With O(service), keeps the daemon whose files these are enabled and running in the same round trip, restarting
    it when one of its files changed (one step where a file task and a service task took two on every run).
  - Render the content on the Ansible controller (for example with the C(ansible.builtin.template) lookup).
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.system_accounts
options:
  directories:
    description: Directories to create (or fix) before the files.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory.
        type: path
        required: true
      owner:
        description: Owner.
        type: str
        default: root
      group:
        description: Group.
        type: str
        default: root
      mode:
        description: Octal mode, as a string.
        type: str
        default: "0755"
      exclusive:
        description:
          - The directory holds only files of O(files), as a directory of Prolog scripts that slurm.conf names by a
            glob does. Any other file in it is removed, as a file of O(retired) is.
        type: bool
        default: false
        version_added: 0.4.0
  files:
    description: The files.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: The file.
        type: path
        required: true
      content:
        description:
          - Its text (shown in diffs). Give exactly one of O(files[].content), O(files[].secret_content) and
            O(files[].secret_content_b64).
        type: str
      secret_content:
        description: Its text when it holds a secret (a database password); never logged, never diffed.
        type: str
      secret_content_b64:
        description:
          - Its bytes, base64-encoded, when it holds a binary secret (the MUNGE key); never logged, never diffed.
        type: str
      owner:
        description: Owner.
        type: str
        default: root
      group:
        description: Group.
        type: str
        default: root
      mode:
        description: Octal mode, as a string.
        type: str
        default: "0644"
      validate:
        description:
          - A command that judges the candidate before it replaces O(files[].dest), C(%s) standing for the candidate
            (written beside the destination first), as M(ansible.builtin.template)'s C(validate). When it fails, no
            file of the step is replaced and the task fails with the command's own output.
          - The role slurm_common gives slurm.conf C(env SLURM_CONF=%s scontrol show hostnames localhost), that is
            Slurm's own parser, which refuses unknown keys and bad values before any daemon sees them, without
            talking to one.
          - Skipped where its program is not installed yet (a new host, where no daemon runs the old file).
        type: str
  absent:
    description:
      - Files that must not exist (removed when present), for example slurm.conf on a compute node of a configless
        cluster, where a stale copy would mislead the Slurm commands run there.
    type: list
    elements: path
    default: []
  retired:
    description:
      - Files this step wrote before that the configuration no longer has (a topology file the inventory dropped).
        Each is removed unless among O(files), and only when its first line carries the collection's header
        (C(Managed by Ansible (hybridhpc.slurm))), so a file of that name the site manages otherwise stays.
      - A removal is a change the daemons must apply, as a changed file is (the markers of O(markers_dir)); the
        removed file is kept as the accepted one for a rollback.
    type: list
    elements: path
    default: []
    version_added: 0.4.0
  modes:
    description:
      - Paths that are not this module's to create (device nodes such as C(/dev/fuse)) whose mode, owner or group
        are fixed when they exist. Nothing happens for one that does not exist.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The path.
        type: path
        required: true
      mode:
        description: Octal mode, as a string.
        type: str
        required: true
      owner:
        description: Owner (kept when not given).
        type: str
      group:
        description: Group (kept when not given).
        type: str
  logs:
    description:
      - Files that daemons or their programs append to (logs), created empty when missing, with their owner, group
        and mode fixed. Their content is never read or changed.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file.
        type: path
        required: true
      owner:
        description: Owner.
        type: str
        default: root
      group:
        description: Group.
        type: str
        default: root
      mode:
        description: Octal mode, as a string.
        type: str
        default: "0640"
  slurm_conf:
    description: The slurm.conf among O(files) (its old and new text decide restart or reconfigure).
    type: path
  markers_dir:
    description: Where the pending restart/reconfigure markers live (for example /var/lib/slurm).
    type: path
  service:
    description:
      - The systemd unit of the daemon these files are for, kept running once they are in place (one
        C(systemctl show) reads its state). It starts when stopped, restarts when one of O(files) changed and
        O(service.restart_on_change) is set, and restarts anyway with O(service.state=restarted).
      - When the unit's files or drop-ins changed on disk (systemd's C(NeedDaemonReload)), systemd reloads its
        units first.
      - The units of O(service) and O(services) to enable are enabled in one C(systemctl enable), before any starts.
      - A unit systemd does not know fails the task, except in check mode, where this run may be the one that
        would install its package.
    type: dict
    suboptions:
      name:
        description: The unit (C(munge), C(slurmd)).
        type: str
        required: true
      state:
        description:
          - C(restarted) restarts the daemon whatever its state (a change it can only read at start).
          - C(enabled) only enables the unit at boot when it is not, and leaves it stopped or running; another step
            runs it, and this one enables it with its own units in one C(systemctl enable) (systemd reloads its
            units once for all of them). A unit systemd does not know, or a masked one, is left to that step.
          - C(stopped) disables the unit at boot and stops it (a daemon the host no longer needs, such as munged once
            the cluster authenticates with auth/slurm alone). A unit systemd does not know needs nothing.
        type: str
        choices: [started, restarted, enabled, stopped]
        default: started
      enabled:
        description:
          - Enable the unit at boot when it is not; with C(false) its boot setting is left as it is.
          - The enable leaves out Debian's SysV hook (C(SYSTEMCTL_SKIP_SYSV)). The rc links of the package's init script
            are not touched, since systemd does not read them for a unit it has.
        type: bool
        default: true
      restart_on_change:
        description: Restart the running daemon when one of O(files) changed in this run (it reads them at start).
        type: bool
        default: true
      drop_ins:
        description:
          - Unit drop-in files the daemon must run with. One that systemd has not loaded for the unit (not among its
            C(DropInPaths)) makes systemd reload its units, and a running daemon restart. systemd 252 (Debian 12)
            does not report a drop-in added in a new directory as a reason to reload.
        type: list
        elements: path
        default: []
      applied_markers_dir:
        description:
          - Where the pending restart/reconfigure markers of O(markers_dir) live. Once the daemon started or
            restarted here, it read every file, so the markers there go (the change they kept is applied).
        type: path
      wait_port:
        description:
          - The TCP port the daemon listens on. After this step started or restarted it, the step waits until the port
            accepts connections on 127.0.0.1 (as M(ansible.builtin.wait_for) would), and fails after
            O(service.wait_timeout) seconds. A daemon this step did not start is not waited for.
        type: int
      wait_timeout:
        description: Seconds O(service.wait_port) may take to answer.
        type: int
        default: 60
  services:
    description:
      - More systemd units these files are for (a path unit and a timer, say), each kept running as O(service) is,
        after it, in the given order, with the same options.
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: partial
    details: Secret files are never diffed.
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Render every Slurm file of this host in one step
  hybridhpc.slurm.slurm_config_files:
    directories:
      - {path: /etc/slurm}
      - {path: /var/log/slurm, owner: slurm, group: slurm, mode: "0750"}
    files:
      - dest: /etc/slurm/slurm.conf
        content: "{{ lookup('ansible.builtin.template', 'slurm.conf.j2') }}"
      - dest: /etc/slurm/cgroup.conf
        content: "{{ lookup('ansible.builtin.template', 'cgroup.conf.j2') }}"
    slurm_conf: /etc/slurm/slurm.conf
    markers_dir: /var/lib/slurm
  register: slurm_files
"""

RETURN = r"""
account_commands:
  description: The commands that created or fixed O(accounts) (or would, in check mode), each an argument list.
  returned: always
  type: list
  elements: list
removed_files:
  description: The files of O(absent) that were removed (or would be, in check mode).
  returned: always
  type: list
  elements: str
changed_files:
  description: The files whose content changed (or would, in check mode).
  returned: always
  type: list
  elements: str
service_actions:
  description: The C(systemctl) verbs run on O(service.name), in order (or that would run, in check mode).
  returned: always
  type: list
  elements: str
  sample: [enable, start]
unit_actions:
  description: The C(systemctl) verbs run on each unit of O(service) and O(services) (or that would run, in check mode).
  returned: always
  type: dict
  sample: {hybridhpc-power.path: [enable, start], hybridhpc-power-reconcile.timer: []}
restart_required:
  description: The daemons must restart (a key reconfigure cannot apply changed, now or in an interrupted run).
  returned: always
  type: bool
config_changed:
  description: The daemons must re-read their files (restart or reconfigure), now or since an interrupted run.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_step, option_entries, system_accounts

SERVICE_OPTIONS = dict(
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["started", "restarted", "enabled", "stopped"], default="started"),
    enabled=dict(type="bool", default=True),
    restart_on_change=dict(type="bool", default=True),
    drop_ins=dict(type="list", elements="path", default=[]),
    applied_markers_dir=dict(type="path"),
    wait_port=dict(type="int"),
    wait_timeout=dict(type="int", default=60),
)


def _services(module):
    """O(services), each entry checked and completed as O(service) is."""
    try:
        return option_entries.validated("services", module.params["services"], SERVICE_OPTIONS)
    except ValueError as err:
        module.fail_json(msg=str(err))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            accounts=dict(type="list", elements="dict", default=[], options=system_accounts.ACCOUNT_OPTIONS),
            directories=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                owner=dict(type="str", default="root"),
                group=dict(type="str", default="root"),
                mode=dict(type="str", default="0755"),
                exclusive=dict(type="bool", default=False),
            )),
            files=dict(type="list", elements="dict", default=[], options=dict(
                dest=dict(type="path", required=True),
                content=dict(type="str"),
                secret_content=dict(type="str", no_log=True),
                secret_content_b64=dict(type="str", no_log=True),
                owner=dict(type="str", default="root"),
                group=dict(type="str", default="root"),
                mode=dict(type="str", default="0644"),
                validate=dict(type="str"),
            ), required_one_of=[("content", "secret_content", "secret_content_b64")],
                mutually_exclusive=[("content", "secret_content", "secret_content_b64")]),
            absent=dict(type="list", elements="path", default=[]),
            retired=dict(type="list", elements="path", default=[]),
            modes=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                mode=dict(type="str", required=True),
                owner=dict(type="str"),
                group=dict(type="str"),
            )),
            slurm_conf=dict(type="path"),
            markers_dir=dict(type="path"),
            logs=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                owner=dict(type="str", default="root"),
                group=dict(type="str", default="root"),
                mode=dict(type="str", default="0640"),
            )),
            service=dict(type="dict", options=SERVICE_OPTIONS),
            # Each entry checked against SERVICE_OPTIONS below (documented once, under service).
            services=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params, services=_services(module))
    result = config_step.converge(module, params)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
