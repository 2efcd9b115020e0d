# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the facts step read from its host, and a check, without Ansible, that none of it changed since.

Why: on a no-op converge the facts step (slurm_host_facts) is the one module
a compute node still runs, and any Ansible module costs the node about 0.16 s
of CPU before it does anything (the AnsiballZ payload, then
``ansible.module_utils.basic`` compiled from it on every run). This file uses
only Python's standard library, so its action plugin can send it as a script
of its own (about a tenth of that).

How it stays exact: while the module gathers the facts and checks each step
record (config_step.verified_steps), an :class:`Observer` notes everything
they read, at the moment they first read it: each path's ``lstat`` (inode,
size, mode, owner, mtime and ctime in nanoseconds: any write, rename, chmod,
chown or xattr change moves the ctime), each directory listed, the content
of the ``/proc`` and ``/sys`` files read (less the fields that move by
themselves), and the output of each command run. Every command must be one
of :data:`COMMANDS` (read-only, cheap); any other, or a source this file
cannot watch, makes the run uncacheable. The module keeps its result with
what it observed (root only, in the step records' directory). The next run,
:func:`probe` observes the same things again and hands back the kept result
only when every observation is the same and the task's arguments and code
are too; otherwise the module runs as before. :func:`observe` is the one
function both use, so the two can only agree when the host did not change.

The probe is a change detector: it never decides anything the module would
decide, it only says "nothing the module read is different".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import builtins
import errno
import grp
import hashlib
import io
import json
import os
import pwd
import re
import socket
import stat
import subprocess
import sys

CACHE_VERSION = 1

# The real functions: an Observer replaces these names on os and builtins.
_lstat = os.lstat
_stat = os.stat
_listdir = os.listdir
_open = builtins.open
_readlink = os.readlink

# Commands the facts and the step checks may run, by basename, with the first argument each may take (None: any).
# Read-only and cheap: the probe runs them again. ip: the default addresses; systemctl show: the units' states;
# sshd -T: the effective sshd configuration pam_slurm_adopt's record checks read (UsePAM).
COMMANDS = {"ip": None, "systemctl": ("show",), "sshd": ("-T",)}
# Name service sources whose data are files this host keeps (pwd and grp read them through NSS).
LOCAL_NSS = frozenset(["files", "compat", "systemd"])
ACCOUNT_FILES = ("/etc/passwd", "/etc/group")
NSSWITCH = "/etc/nsswitch.conf"
# Where dpkg keeps what dpkg-query lists: its status file and the journal of changes not yet merged into it.
DPKG_FILES = ("/var/lib/dpkg/status",)
DPKG_DIRS = ("/var/lib/dpkg/updates",)
# Fields of /proc files that move while nothing about the host changes.
_VOLATILE_LINES = {
    "/proc/cpuinfo": re.compile(r"^(cpu MHz|bogomips)\s*:", re.I),
}
_KEPT_LINES = {
    # Only the totals (memtotal_mb, swaptotal_mb): the free amounts move all the time.
    "/proc/meminfo": re.compile(r"^(MemTotal|SwapTotal):"),
}
# Address lifetimes count down (DHCP, SLAAC), route caches expire.
_COMMAND_NOISE = re.compile(r"\b(valid_lft|preferred_lft|expires)\s+\S+")


def _stat_fields(st):
    if stat.S_ISDIR(st.st_mode):
        # A directory's times and size move whenever an entry is added or renamed in it, which says
        # nothing of the directory itself; what was read of its entries is observed on its own.
        return ["d", st.st_mode, st.st_ino, st.st_dev, st.st_uid, st.st_gid]
    return ["f", st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, st.st_size,
            st.st_mtime_ns, st.st_ctime_ns]


def _xattr(path, name):
    try:
        return os.getxattr(path, name, follow_symlinks=False).hex()
    except (OSError, AttributeError):
        return None


def _observe_path(path):
    """lstat of path (and of its target when a link): None when missing."""
    try:
        st = _lstat(path)
    except OSError as error:
        return [None, error.errno]
    fields = _stat_fields(st)
    if stat.S_ISDIR(st.st_mode):
        # Its SELinux label, which a directory's ctime (not kept) would have told.
        fields.append(_xattr(path, "security.selinux"))
    if stat.S_ISLNK(st.st_mode):
        try:
            link = _readlink(path)
            fields.append(link)
            # A link into /proc (/etc/mtab): its target is a new inode for every process that looks.
            if not _is_proc(os.path.normpath(os.path.join(os.path.dirname(path), link))):
                fields.append(_stat_fields(_stat(path)))
        except OSError as error:
            fields.append(error.errno)
    return fields


def _proc_content(path):
    try:
        with _open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        return [None, error.errno]
    return normalized(path, data.decode("utf-8", "replace"))


def normalized(path, text):
    """The digest of what a /proc or /sys file's text says that the watched facts read."""
    if path in _KEPT_LINES:
        text = "\n".join(line for line in text.splitlines() if _KEPT_LINES[path].match(line))
    elif path in _VOLATILE_LINES:
        text = "\n".join(line for line in text.splitlines() if not _VOLATILE_LINES[path].match(line))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _listing(path):
    try:
        return sorted(_listdir(path))
    except OSError as error:
        return [None, error.errno]


def command_allowed(argv):
    if not argv:
        return False
    allowed = COMMANDS.get(os.path.basename(argv[0]), False)
    return allowed is None or (allowed is not False and len(argv) > 1 and argv[1] in allowed)


def command_value(rc, out):
    return [rc, hashlib.sha256(_COMMAND_NOISE.sub(r"\1", out).encode("utf-8")).hexdigest()]


def run_command(argv):
    """argv run as the module runs it (same environment): its exit code and output."""
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False,
                              stdin=subprocess.DEVNULL)
    except OSError as error:
        return [None, error.errno]
    return command_value(proc.returncode, proc.stdout.decode("utf-8", "replace"))


def _identity():
    """This boot of this system: the kernel's boot id, and when its PID 1 started (a container's own)."""
    with _open("/proc/sys/kernel/random/boot_id") as handle:
        boot = handle.read().strip()
    with _open("/proc/1/stat") as handle:
        pid1 = handle.read()
    return [boot, pid1[pid1.rindex(")") + 2:].split()[19]]


def observe(kind, key):
    """The value of one observation now (the module's Observer and the probe both call this)."""
    if kind == "path":
        return _observe_path(key)
    if kind == "proc":
        return _proc_content(key)
    if kind == "listdir":
        return _listing(key)
    if kind == "command":
        return run_command(key)
    if kind == "uname":
        return list(os.uname())
    if kind == "fqdn":
        return socket.getfqdn()
    if kind == "identity":
        return _identity()
    raise ValueError("unknown observation %r" % kind)


def digest(values):
    return hashlib.sha256(json.dumps(values, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _is_proc(path):
    return path.startswith("/proc/") or path.startswith("/sys/")


class Observer(object):
    """Notes what the code run inside it reads (see the module docstring); observations in first-read order.

    Inside, ``os.stat``, ``os.lstat``, ``os.listdir``, ``os.scandir``, ``open`` (builtin, io, os) and the
    pwd/grp lookups are wrapped, and so is ``module.run_command`` when a module is given.
    """

    def __init__(self, module=None):
        self.module = module
        self.keys = []
        self.values = []
        self._seen = set()
        self.problems = []
        self._saved = []

    # -- recording ------------------------------------------------------

    def add(self, kind, key, value=None, known=False):
        mark = (kind, json.dumps(key))
        if mark in self._seen:
            return
        self._seen.add(mark)
        value = value if known else observe(kind, key)
        self.keys.append([kind, key])
        self.values.append(value)

    def path(self, path):
        if isinstance(path, int):
            return
        path = os.path.abspath(os.fsdecode(path))
        if path.startswith("/proc/self/") or path.startswith("/proc/thread-self/") or re.match(r"^/proc/\d+/", path):
            if not path.startswith("/proc/1/"):
                # This process's own: what it holds says nothing of the host; PID 1's is in the identity.
                return
        if _is_proc(path):
            try:
                is_dir = stat.S_ISDIR(_stat(path).st_mode)
            except OSError:
                is_dir = False
            self.add("listdir" if is_dir else "proc", path)
        else:
            self.add("path", path)

    def listing(self, path):
        if isinstance(path, int):
            return
        self.add("listdir", os.path.abspath(os.fsdecode(path if path is not None else ".")))

    def accounts(self):
        if ("path", json.dumps(NSSWITCH)) in self._seen:
            return
        for name in ACCOUNT_FILES + (NSSWITCH,):
            self.add("path", name)
        try:
            with _open(NSSWITCH) as handle:
                lines = handle.read().splitlines()
        except OSError:
            return
        for line in lines:
            words = line.split("#", 1)[0].split()
            if words and words[0] in ("passwd:", "group:"):
                sources = [word for word in words[1:] if not word.startswith("[")]
                if not set(sources) <= LOCAL_NSS:
                    self.problems.append("accounts come from %s" % " ".join(sources))
                    return

    def command(self, argv, rc, out):
        argv = [os.fsdecode(arg) for arg in argv] if isinstance(argv, (list, tuple)) else argv
        if not isinstance(argv, list) or not command_allowed(argv):
            self.problems.append("ran %s" % (argv if isinstance(argv, str) else " ".join(argv)))
            return
        self.add("command", argv, command_value(rc, out or ""), known=True)

    # -- wrapping -------------------------------------------------------

    def _wrap(self, owner, name, make):
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        setattr(owner, name, make(original))

    def __enter__(self):
        observer = self

        def on_path(original):
            def wrapped(path, *args, **kwargs):
                if not kwargs.get("dir_fd"):
                    observer.path(path)
                return original(path, *args, **kwargs)
            return wrapped

        def on_listing(original):
            def wrapped(path=None, *args, **kwargs):
                observer.listing(path)
                return original(*((path,) if path is not None else ()), *args, **kwargs)
            return wrapped

        def on_accounts(original):
            def wrapped(*args, **kwargs):
                observer.accounts()
                return original(*args, **kwargs)
            return wrapped

        def on_command(original):
            def wrapped(args, *more, **kwargs):
                rc, out, err = original(args, *more, **kwargs)
                observer.command(args, rc, out)
                return rc, out, err
            return wrapped

        for name in ("stat", "lstat", "readlink", "access"):
            self._wrap(os, name, on_path)
        for name in ("listdir", "scandir"):
            self._wrap(os, name, on_listing)
        self._wrap(os, "open", on_path)
        self._wrap(builtins, "open", on_path)
        self._wrap(io, "open", on_path)
        for owner, names in ((pwd, ("getpwnam", "getpwuid", "getpwall")), (grp, ("getgrnam", "getgrgid", "getgrall"))):
            for name in names:
                self._wrap(owner, name, on_accounts)
        if self.module is not None:
            self._wrap(self.module, "run_command", on_command)
        return self

    def __exit__(self, *exc):
        while self._saved:
            owner, name, original = self._saved.pop()
            if owner is self.module:
                # run_command is the module's bound method: drop the instance's wrapper.
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        return False


def host_observations(observer):
    """What is always observed: this boot of this host, its names and kernel, and dpkg's database."""
    try:
        _identity()
    except (OSError, ValueError, IndexError) as error:
        # Not Linux, or /proc hidden: a reboot or a new container could not be told.
        observer.problems.append("no boot id and PID 1 start time (%s)" % error)
        return
    observer.add("identity", None)
    observer.add("uname", None)
    observer.add("fqdn", None)
    for path in DPKG_FILES:
        observer.add("path", path)
    for path in DPKG_DIRS:
        observer.add("listdir", path)


def read_file(path):
    """path's content base64-encoded, as slurp returns it (the module's ``file`` option, and the probe's)."""
    try:
        with _open(path, "rb") as handle:
            return {"exists": True, "content": base64.b64encode(handle.read()).decode("ascii")}
    except (IOError, OSError):
        return {"exists": False, "content": ""}


def write_cache(path, key, observer, result):
    """Keep result with what was observed (0600, replaced atomically)."""
    data = json.dumps({"version": CACHE_VERSION, "key": key, "observed": observer.keys,
                       "digest": digest(observer.values), "result": result}, sort_keys=True).encode("utf-8")
    temp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.rename(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.unlink(temp)
        raise


def drop_cache(path):
    try:
        os.unlink(path)
    except OSError as error:
        if error.errno != errno.ENOENT:
            raise


def probe(request):
    """The kept result when nothing it was made from changed: ``{"result": ...}``, else ``{"miss": why}``.

    request: ``{"cache": path, "key": the task's arguments and code, "file": a file to read now or None}``.
    """
    try:
        with _open(request["cache"], "rb") as handle:
            cache = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return {"miss": "no kept result"}
    if not isinstance(cache, dict) or cache.get("version") != CACHE_VERSION:
        return {"miss": "no kept result"}
    if cache.get("key") != request["key"]:
        return {"miss": "the task's arguments or the collection changed"}
    try:
        values = [observe(kind, key) for kind, key in cache["observed"]]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        return {"miss": "cannot observe: %s" % error}
    if digest(values) != cache.get("digest"):
        return {"miss": "the host changed"}
    result = cache["result"]
    if request.get("file"):
        result["file"] = read_file(request["file"])
    return {"result": result}


def main(request):
    """Run by the action plugin, this file as a script: prints probe()'s answer as JSON."""
    try:
        answer = probe(request)
    except Exception as error:  # noqa: BLE001 -- any failure means: run the module
        answer = {"miss": "probe failed: %s" % error}
    # A script's answer on its stdout (not a module: no exit_json).
    sys.stdout.write(json.dumps(answer) + "\n")
