# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every configuration file of a host in one step: what changed, and what the daemons must do.

The slurm_config_files module writes a host's files in one round trip (one
template task per file cost a round trip each). The decisions live here:
which files differ, whether the slurm.conf change needs a restart or only a
reconfigure, and what the pending markers say. Markers survive a run that
fails between the new configuration and the daemons' restart or reconfigure,
so the next run still applies it (the daemon roles remove them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import os
import tempfile

from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_conf

# Files the daemons read only when they start (their man pages: "Changes to
# the configuration file take effect upon restart of Slurm daemons").
RESTART_FILES = frozenset(("job_container.conf", "namespace.yaml"))
MARKER_PREFIX = "hybridhpc-pending-"
MARKERS = ("restart", "reconfigure")
# Under markers_dir: each file as the cluster last accepted it (no change pending
# when it was replaced), put back when Slurm rejects its successor.
ACCEPTED_DIR = "hybridhpc-accepted"
# In the first line of the files the collection writes from data (module_utils/site_files.py):
# slurm_config_files removes a retired file only when it has it.
MANAGED_HEADER = b"Managed by Ansible (hybridhpc.slurm)"


def read_bytes(path):
    """The file's bytes, or None when it does not exist or cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def decode_b64(text):
    """The bytes of a base64 secret (a MUNGE key), or None when it is not valid base64."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def write_atomically(module, path, data, prefix):
    """Write bytes to path through a 0600 temporary file in its directory and an atomic move.

    Never puts the content in an error: secret_file and slurm_config_files
    (secret files included) fail with the path and the error only.
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=prefix)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if os.path.lexists(path):
            module.atomic_move(tmp, path)
        else:
            # A new file keeps the temporary file's 0600 until the caller sets
            # its attributes: atomic_move would first give it the umask's mode
            # (0644), and a new key or password file would be world-readable
            # for that moment.
            os.rename(tmp, path)
    except Exception as exc:  # noqa: BLE001 -- report any write failure without the content
        if os.path.exists(tmp):
            os.unlink(tmp)
        module.fail_json(msg="could not write %s: %s" % (path, exc))


def marker_path(directory, name):
    return os.path.join(directory, MARKER_PREFIX + name)


def decide(changed_files, slurm_conf_path, old_conf, new_conf, pending):
    """What the daemons must do, from this run's changes and the markers already there.

    changed_files: destinations whose content changed now; slurm_conf_path and
    old_conf/new_conf: the slurm.conf among them and its texts (old_conf None
    when there was none); pending: markers found (names from MARKERS).
    Returns (markers to add now, restart_required, config_changed).
    """
    changed_now = bool(changed_files)
    restart_now = bool(
        slurm_conf_path
        and slurm_conf_path in changed_files
        and slurm_conf.needs_restart(old_conf or "", new_conf or "")
    ) or any(os.path.basename(path) in RESTART_FILES for path in changed_files)
    add = (["restart"] if restart_now else []) + (["reconfigure"] if changed_now else [])
    restart_required = restart_now or "restart" in pending
    config_changed = changed_now or bool(set(pending) & set(MARKERS))
    return add, restart_required, config_changed


def accepted_path(markers_dir, dest):
    """Where the accepted copy of ``dest`` lives (its whole path in the name: two directories may hold a slurm.conf)."""
    return os.path.join(markers_dir, ACCEPTED_DIR, dest.strip("/").replace("/", "%"))


def kept_private(kept_stat):
    """Whether a kept copy is of a private file (slurm.key): readable by its owner alone, and that owner not root.

    Copies carry their file's owner since removed files are kept; an older,
    root-owned copy is of a file Slurm's daemons read, so it comes back readable.
    """
    return kept_stat.st_uid != 0 and not kept_stat.st_mode & 0o077


def keeps_accepted_copy(current, pending):
    """Whether the file about to be replaced is the one the cluster accepted, to keep for a rollback.

    With a change pending (markers from a run that did not finish), the file on
    disk was never applied: the copy kept before it stays the accepted one.
    """
    return current is not None and not pending
