# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared filesystems (homes, scratch, the controllers' StateSaveLocation): the role's decisions.

A cluster's users need the same home and scratch on every node, and an HA
pair of controllers one StateSaveLocation both read and write. The role
mounts them (ansible.posix.mount, fstab) and makes each daemon that needs one
require it (a systemd drop-in, ``RequiresMountsFor=``): systemd then mounts
it before the daemon starts, and does not start the daemon when it cannot. A
slurmctld started on the empty directory under a missing mount starts cold,
without its jobs: Slurm itself treats a missing parent directory as fatal for
that reason, but an empty mount point is no missing directory.

What is refused, and why:
  - ``soft`` NFS mounts for StateSaveLocation and homes: a server that does
    not answer in time makes a write fail (EIO) instead of wait, so slurmctld
    saves half a state file, or a job half its output.
  - ``ro`` for StateSaveLocation (slurmctld writes it) and a state mount on a
    host that runs no slurmctld, or at another path than StateSaveLocation.
  - Two controllers of one cluster that do not mount one source there: the
    backup would take over from a state the primary never wrote.
  - Mounting over a StateSaveLocation that holds files and is not mounted
    from the source yet, or is mounted from another: the mount would hide the
    saved state, and the next start of slurmctld would lose every job. The
    state must be moved into the share first (the message says how).
  - A path listed after another entry's path beneath it: mounted in list
    order, the later mount would hide the earlier one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

PURPOSES = ("home", "scratch", "state", "other")
# The daemons whose units the role gives a drop-in, and what each purpose requires by default:
# jobs run in homes and scratch (slurmd), slurmctld keeps its state in StateSaveLocation.
UNITS = ("slurmctld", "slurmd", "slurmdbd", "slurmrestd", "sackd")
DEFAULT_UNITS = {"home": ("slurmd",), "scratch": ("slurmd",), "state": ("slurmctld",), "other": ()}
NETWORK_FSTYPES = ("nfs", "nfs4")
STATES = ("mounted", "absent")
FSTYPE_RE = re.compile(r"^[a-z0-9][a-z0-9._]*$")
# An NFS source: HOST:/export (a name, an IPv4 address or a [bracketed] IPv6 one).
NFS_SRC_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):/\S*$")
# Not state: an empty new filesystem's own entry.
IGNORED_ENTRIES = ("lost+found",)


def _options(opts):
    if opts is None or opts == "":
        return []
    if isinstance(opts, (list, tuple)):
        return [str(o).strip() for o in opts]
    return [o.strip() for o in str(opts).split(",")]


def normalize(entry):
    """One entry with its defaults: fstype nfs4, opts defaults, purpose other, state mounted."""
    entry = dict(entry)
    opts = _options(entry.get("opts")) or ["defaults"]
    purpose = entry.get("purpose") or "other"
    required_by = entry.get("required_by")
    if required_by is None:
        required_by = list(DEFAULT_UNITS.get(purpose, ()))
    return {
        "path": str(entry.get("path") or ""),
        "src": str(entry.get("src") or ""),
        "fstype": str(entry.get("fstype") or "nfs4"),
        "opts": ",".join(opts),
        "purpose": purpose,
        "state": entry.get("state") or "mounted",
        "required_by": [str(u) for u in required_by],
    }


def mounts(entries):
    """The entries for ansible.posix.mount, in the inventory's order."""
    return [normalize(e) for e in entries or []]


def _entry_problems(where, entry, raw):
    found = []
    path = entry["path"]
    if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
        found.append("%s.path: %r is not an absolute, normalized path other than / (/home, /scratch)" % (where, path))
    if entry["state"] not in STATES:
        found.append("%s.state: %r is not one of %s" % (where, entry["state"], ", ".join(STATES)))
    if entry["purpose"] not in PURPOSES:
        found.append("%s.purpose: %r is not one of %s" % (where, entry["purpose"], ", ".join(PURPOSES)))
    if not FSTYPE_RE.match(entry["fstype"]):
        found.append("%s.fstype: %r is not a filesystem type (nfs4, nfs, none for a bind mount)" % (where, entry["fstype"]))
    if entry["state"] == "mounted" and not entry["src"]:
        found.append("%s.src: give what to mount (nfs1.example.org:/export/home)" % where)
    elif entry["fstype"] in NETWORK_FSTYPES and entry["src"] and not NFS_SRC_RE.match(entry["src"]):
        found.append("%s.src: %r is not HOST:/EXPORT, as %s mounts need" % (where, entry["src"], entry["fstype"]))
    opts = entry["opts"].split(",")
    if "" in opts or any(re.search(r"\s", o) for o in opts):
        found.append("%s.opts: %r has an empty option or one with a space: give options as a list or a "
                     "comma-separated string (hard,noatime)" % (where, raw.get("opts")))
    if entry["fstype"] in NETWORK_FSTYPES and "soft" in opts and entry["purpose"] in ("state", "home"):
        found.append("%s.opts: soft makes a write fail when the NFS server is slow to answer, so %s: use hard "
                     "(NFS's default), and timeo/retrans to tune how long it waits"
                     % (where, "slurmctld saves half a state file" if entry["purpose"] == "state"
                        else "a job loses half its output"))
    if entry["purpose"] == "state" and "ro" in opts:
        found.append("%s.opts: ro on StateSaveLocation, which slurmctld writes: drop ro" % where)
    required_by = raw.get("required_by")
    if required_by is not None and not isinstance(required_by, (list, tuple)):
        found.append("%s.required_by: give a list of daemons (%s)" % (where, ", ".join(UNITS)))
    else:
        unknown = [u for u in entry["required_by"] if u not in UNITS]
        if unknown:
            found.append("%s.required_by: %s not among the daemons the collection runs (%s)"
                         % (where, ", ".join(unknown), ", ".join(UNITS)))
    return found


def problems(entries, host):
    """What the first play refuses of this host's ``shared_filesystems_mounts``, before any host changes.

    ``host``: is_controller (this host runs slurmctld), state_save_location (the cluster's StateSaveLocation).
    """
    if entries is None:
        return []
    if not isinstance(entries, (list, tuple)):
        return ["shared_filesystems_mounts: give a list of mounts ({path: /home, src: 'nfs1:/export/home', purpose: home})"]
    found = []
    seen = {}
    for index, raw in enumerate(entries):
        where = "shared_filesystems_mounts[%d]" % index
        if not isinstance(raw, dict):
            found.append("%s: give a mapping with path and src, not %r" % (where, raw))
            continue
        unknown = sorted(set(raw) - {"path", "src", "fstype", "opts", "purpose", "state", "required_by"})
        if unknown:
            found.append("%s: unknown key(s) %s (path, src, fstype, opts, purpose, state, required_by)"
                         % (where, ", ".join(unknown)))
        entry = normalize(raw)
        found.extend(_entry_problems(where, entry, raw))
        path = entry["path"]
        if path in seen:
            found.append("%s.path: %s is also shared_filesystems_mounts[%d]'s: one mount per path" % (where, path, seen[path]))
            continue
        for other, other_index in seen.items():
            if other.startswith(path.rstrip("/") + "/"):
                found.append("%s.path: %s is listed after shared_filesystems_mounts[%d] (%s) beneath it, and would hide it: "
                             "list %s first" % (where, path, other_index, other, path))
        seen[path] = index
        if entry["purpose"] == "state" and entry["state"] == "mounted":
            if not host.get("is_controller"):
                found.append("%s.purpose: state is slurmctld's StateSaveLocation, and %s runs no slurmctld: "
                             "set it on the controllers only" % (where, host.get("host", "this host")))
            elif path != host.get("state_save_location"):
                found.append("%s.path: %s is not this cluster's StateSaveLocation (%s): mount the state there, or set "
                             "slurm_config.StateSaveLocation to %s" % (where, path, host.get("state_save_location"), path))
    return found


def _state_entry(entries):
    for entry in mounts(entries if isinstance(entries, (list, tuple)) else []):
        if isinstance(entry, dict) and entry["purpose"] == "state" and entry["state"] == "mounted":
            return entry
    return None


def cluster_problems(controller_entries, cluster):
    """An HA pair that would not share its state: ``controller_entries`` maps each controller to its entries."""
    if len(controller_entries) < 2:
        return []
    states = {host: _state_entry(entries) for host, entries in controller_entries.items()}
    with_state = {h: e for h, e in states.items() if e is not None}
    if not with_state:
        return []
    without = sorted(h for h, e in states.items() if e is None)
    found = []
    if without:
        found.append("shared_filesystems_mounts: cluster %s's controllers %s mount StateSaveLocation from a share and %s do "
                     "not: a backup that takes over must read the state the primary wrote; give every controller the "
                     "same purpose: state entry" % (cluster, ", ".join(sorted(with_state)), ", ".join(without)))
    sources = sorted({(e["src"], e["fstype"]) for e in with_state.values()})
    if len(sources) > 1:
        found.append("shared_filesystems_mounts: cluster %s's controllers mount StateSaveLocation from %s: one source for all "
                     "of them, or the backup takes over from a state the primary never wrote"
                     % (cluster, " and ".join("%s (%s)" % s for s in sources)))
    return found


def host_problems(entries, read, services):
    """What this host's current mounts forbid (``read``: the shared_filesystems_state module's paths).

    ``services``: the unit states of the daemons here ({"slurmctld": "active"}), for the fix the message gives.
    """
    found = []
    for index, entry in enumerate(mounts(entries)):
        if entry["purpose"] != "state" or entry["state"] != "mounted":
            continue
        now = read.get(entry["path"]) or {}
        if now.get("from_src"):
            continue
        source = now.get("source")
        files = [name for name in now.get("entries") or [] if name not in IGNORED_ENTRIES]
        if now.get("mounted"):
            found.append("shared_filesystems_mounts[%d]: %s is mounted from %s, not %s; remounting it under a running "
                         "controller would swap its state: stop slurmctld on this host, unmount %s, copy the state "
                         "into %s, then run again" % (index, entry["path"], source, entry["src"], entry["path"],
                                                      entry["src"]))
        elif files:
            running = (services or {}).get("slurmctld") in ("active", "activating", "reloading")
            found.append("shared_filesystems_mounts[%d]: %s holds %d file(s) of slurmctld's saved state (%s) and is not "
                         "mounted from %s yet: the mount would hide them and slurmctld would start cold, losing every "
                         "job. %sCopy the directory into %s (keep owner and modes), empty %s, then run again"
                         % (index, entry["path"], len(files), ", ".join(sorted(files)[:3]), entry["src"],
                            "Stop slurmctld on this host (it is running). " if running else "", entry["src"],
                            entry["path"]))
    return found


def dropins(entries, units_here):
    """Each daemon unit's drop-in text (``RequiresMountsFor=`` its mounts), or None where it needs none.

    Every daemon of UNITS is in the answer, so a drop-in no longer needed is removed; one that does not run on
    this host (``units_here``) needs none.
    """
    paths = {unit: [] for unit in UNITS}
    for entry in mounts(entries):
        if entry["state"] != "mounted":
            continue
        for unit in entry["required_by"]:
            if unit in paths and unit in units_here and entry["path"] not in paths[unit]:
                paths[unit].append(entry["path"])
    answer = {}
    for unit in UNITS:
        if not paths[unit]:
            answer[unit] = None
            continue
        answer[unit] = (
            "# Written by hybridhpc.slurm (role shared_filesystems): systemd mounts these before %s starts,\n"
            "# and does not start it when one cannot be mounted (no start on an empty mount point).\n"
            "[Unit]\nRequiresMountsFor=%s\n" % (unit, " ".join(paths[unit]))
        )
    return answer


def parse_mountinfo(text):
    """/proc/self/mountinfo as {mount point: {device, root, fstype, source}}; the last mount of a path wins
    (it is the one seen)."""
    found = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        tail = right.split()
        if not sep or len(fields) < 6 or len(tail) < 2:
            continue
        found[_unescape(fields[4])] = {"device": fields[2], "root": _unescape(fields[3]), "fstype": tail[0],
                                       "source": _unescape(tail[1])}
    return found


def _unescape(field):
    # mountinfo writes space, tab, newline and backslash as octal escapes (\040).
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _containing(mountinfo, path):
    best = "/"
    for point in mountinfo:
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best = point
    return best


def mounted_from(mountinfo, path, src, fstype):
    """Whether ``path`` is a mount point, and whether of ``src`` (what fstab would mount there).

    A network mount names its source (HOST:/EXPORT); a bind mount does not (the kernel keeps the device and
    the directory within it), so for a bind its device and root are compared with those under ``src``.
    """
    info = mountinfo.get(path)
    if info is None:
        return {"mounted": False, "from_src": False, "source": None}
    if fstype in NETWORK_FSTYPES or info["fstype"] in NETWORK_FSTYPES:
        return {"mounted": True, "from_src": info["source"].rstrip("/") == src.rstrip("/"), "source": info["source"]}
    if src.startswith("/"):
        outer = _containing(mountinfo, src)
        under = mountinfo.get(outer)
        if under is not None:
            relative = src[len(outer.rstrip("/")):].strip("/")
            root = posixpath.join(under["root"], relative) if relative else under["root"]
            if under["device"] == info["device"] and posixpath.normpath(root) == posixpath.normpath(info["root"]):
                return {"mounted": True, "from_src": True, "source": src}
    return {"mounted": True, "from_src": info["source"] == src,
            "source": "%s (%s%s)" % (info["source"], info["fstype"], ", " + info["root"] if info["root"] != "/" else "")}
