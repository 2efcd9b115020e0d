"""The collection as users get it: `ansible-galaxy collection build`, then `install` of that tarball.

Tests that must see what a user sees (not the repository through the
.collections link) run from ``install(dest)``: a fresh collections path holding
only hybridhpc.slurm, installed offline from its own tarball. Its collection
dependencies come from the PyPI `ansible` bundle in the venv's site-packages,
where ansible-core finds them whatever the collections path says.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent


def clean_env(collections_path=None):
    """This process's environment without the developer's ANSIBLE_* (the Makefile exports the repo's ansible.cfg,
    whose collections_path holds the repository link); run it outside the checkout, whose ansible.cfg Ansible
    would read from the working directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    if collections_path is not None:
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections_path)
    return env


def run(cmd, timeout=300, **kwargs):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


def build(out_dir):
    """Build the tarball from the working tree into ``out_dir``; return its path."""
    pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    res = run([BIN / "ansible-galaxy", "collection", "build", "--force", "--output-path", out_dir, ROOT],
              env=clean_env(), cwd=out_dir)
    if res.returncode != 0:
        raise AssertionError("ansible-galaxy collection build failed:\n%s%s" % (res.stdout, res.stderr))
    (tarball,) = pathlib.Path(out_dir).glob("hybridhpc-slurm-*.tar.gz")
    return tarball


def links_leaving(tarball):
    """Members that are links whose target is not a member of the tarball (an install aborts on them)."""
    with tarfile.open(tarball) as tar:
        members = tar.getmembers()
    names = {m.name for m in members}
    bad = []
    for member in members:
        if member.issym() or member.islnk():
            if member.issym():
                target = os.path.normpath(os.path.join(os.path.dirname(member.name), member.linkname))
            else:
                target = os.path.normpath(member.linkname)
            if target.startswith("..") or os.path.isabs(member.linkname) or target not in names:
                bad.append("%s -> %s" % (member.name, member.linkname))
    return bad


def install(tarball, collections_path):
    """``ansible-galaxy collection install`` of the tarball, offline, into a fresh path; return the installed dir."""
    pathlib.Path(collections_path).mkdir(parents=True, exist_ok=True)
    res = run([BIN / "ansible-galaxy", "collection", "install", "--offline", "--force", "-p", collections_path, tarball],
              env=clean_env(collections_path), cwd=collections_path)
    if res.returncode != 0:
        raise AssertionError("ansible-galaxy collection install failed:\n%s%s" % (res.stdout, res.stderr))
    return pathlib.Path(collections_path) / "ansible_collections" / "hybridhpc" / "slurm"


def collection_present(name):
    """Whether the collection ``namespace.name`` is importable here (find_spec raises when its namespace is not)."""
    try:
        return importlib.util.find_spec("ansible_collections." + name) is not None
    except ModuleNotFoundError:
        return False
