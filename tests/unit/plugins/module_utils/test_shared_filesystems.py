# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""shared_filesystems_mounts: the role's refusals (first play), its mounts, drop-ins and the read of mountinfo."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest

from ansible_collections.hybridhpc.slurm.plugins.filter.shared_filesystems import (
    shared_filesystems_cluster_problems,
    shared_filesystems_dropins,
    shared_filesystems_host_problems,
    shared_filesystems_mounts,
    shared_filesystems_problems,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.shared_filesystems import mounted_from, parse_mountinfo

STATE = "/var/lib/slurm/slurmctld"
CTL = {"host": "ctl1", "is_controller": True, "state_save_location": STATE}
NODE = {"host": "c1", "is_controller": False, "state_save_location": STATE}
HOME = {"path": "/home", "src": "nfs1:/export/home", "purpose": "home"}
STATE_MOUNT = {"path": STATE, "src": "nfs1:/export/alpha-state", "purpose": "state", "opts": ["hard", "noatime"]}


def test_good_mounts_pass_and_get_their_defaults():
    assert shared_filesystems_problems([HOME, STATE_MOUNT], CTL) == []
    assert shared_filesystems_problems([HOME], NODE) == []
    assert shared_filesystems_problems([], NODE) == []
    assert shared_filesystems_problems(None, NODE) == []
    home, state = shared_filesystems_mounts([HOME, STATE_MOUNT])
    assert home == {"path": "/home", "src": "nfs1:/export/home", "fstype": "nfs4", "opts": "defaults",
                    "purpose": "home", "state": "mounted", "required_by": ["slurmd"]}
    assert state["opts"] == "hard,noatime" and state["required_by"] == ["slurmctld"]
    assert shared_filesystems_mounts([{"path": "/data", "src": "/srv/data", "fstype": "none", "opts": "bind"}])[0][
        "required_by"] == []


@pytest.mark.parametrize("entries, host, words", [
    ("nfs1:/home", NODE, "shared_filesystems_mounts: give a list"),
    (["/home"], NODE, "shared_filesystems_mounts[0]: give a mapping"),
    ([dict(HOME, path="home")], NODE, "shared_filesystems_mounts[0].path: 'home' is not an absolute"),
    ([dict(HOME, path="/home/")], NODE, "not an absolute, normalized path"),
    ([dict(HOME, path="/")], NODE, "other than /"),
    ([dict(HOME, mountpoint="/home")], NODE, "unknown key(s) mountpoint"),
    ([dict(HOME, purpose="homes")], NODE, "shared_filesystems_mounts[0].purpose: 'homes' is not one of home"),
    ([dict(HOME, state="present")], NODE, "shared_filesystems_mounts[0].state: 'present' is not one of mounted, absent"),
    ([dict(HOME, fstype="NFS 4")], NODE, "shared_filesystems_mounts[0].fstype"),
    ([dict(HOME, src="")], NODE, "shared_filesystems_mounts[0].src: give what to mount"),
    ([dict(HOME, src="/export/home")], NODE, "is not HOST:/EXPORT"),
    ([dict(HOME, opts="hard, ,noatime")], NODE, "an empty option"),
    ([dict(HOME, opts=["soft"])], NODE, "soft makes a write fail"),
    ([dict(STATE_MOUNT, opts="soft,timeo=10")], CTL, "slurmctld saves half a state file"),
    ([dict(STATE_MOUNT, opts="ro")], CTL, "ro on StateSaveLocation"),
    ([dict(HOME, required_by="slurmd")], NODE, "required_by: give a list"),
    ([dict(HOME, required_by=["slurmd", "nginx"])], NODE, "required_by: nginx not among"),
    ([HOME, dict(HOME, src="nfs2:/home")], NODE, "shared_filesystems_mounts[1].path: /home is also shared_filesystems_mounts[0]'s"),
    ([{"path": "/home/projects", "src": "nfs1:/p"}, HOME], NODE, "listed after shared_filesystems_mounts[0] (/home/projects)"),
    ([STATE_MOUNT], NODE, "c1 runs no slurmctld"),
    ([dict(STATE_MOUNT, path="/srv/state")], CTL, "is not this cluster's StateSaveLocation (/var/lib/slurm/slurmctld)"),
])
def test_bad_mounts_are_refused_naming_the_entry_and_the_fix(entries, host, words):
    found = shared_filesystems_problems(entries, host)
    assert any(words in p for p in found), found


def test_soft_is_allowed_for_scratch_and_a_nested_path_after_its_parent():
    scratch = {"path": "/scratch", "src": "nfs1:/scratch", "purpose": "scratch", "opts": "soft"}
    nested = {"path": "/home/projects", "src": "nfs1:/p"}
    assert shared_filesystems_problems([HOME, nested, scratch], NODE) == []
    # A state mount that is being removed is no state mount.
    assert shared_filesystems_problems([dict(STATE_MOUNT, state="absent")], NODE) == []


def test_an_ha_pair_shares_one_state_source():
    assert shared_filesystems_cluster_problems({"ctl1": [STATE_MOUNT], "ctl2": [STATE_MOUNT]}, "alpha") == []
    assert shared_filesystems_cluster_problems({"ctl1": [STATE_MOUNT]}, "alpha") == []
    # No share at all: the site keeps the state its own way.
    assert shared_filesystems_cluster_problems({"ctl1": [HOME], "ctl2": []}, "alpha") == []
    found = shared_filesystems_cluster_problems({"ctl1": [STATE_MOUNT], "ctl2": [HOME]}, "alpha")
    assert found and "ctl1 mount StateSaveLocation from a share and ctl2 do not" in found[0]
    found = shared_filesystems_cluster_problems(
        {"ctl1": [STATE_MOUNT], "ctl2": [dict(STATE_MOUNT, src="nfs2:/export/alpha-state")]}, "alpha")
    assert found and "nfs1:/export/alpha-state (nfs4) and nfs2:/export/alpha-state (nfs4)" in found[0]


def read(path=STATE, **state):
    answer = {"mounted": False, "from_src": False, "source": None, "entries": []}
    answer.update(state)
    return {path: answer}


def test_a_mount_that_would_hide_the_saved_state_is_refused():
    assert shared_filesystems_host_problems([STATE_MOUNT], read(entries=[])) == []
    assert shared_filesystems_host_problems([STATE_MOUNT], read(entries=["lost+found"])) == []
    assert shared_filesystems_host_problems([STATE_MOUNT], read(mounted=True, from_src=True, entries=["job_state"])) == []
    found = shared_filesystems_host_problems([STATE_MOUNT], read(entries=["job_state", "node_state"]),
                                             {"slurmctld": "active"})
    assert len(found) == 1 and "holds 2 file(s)" in found[0] and "would start cold" in found[0]
    assert "Stop slurmctld on this host (it is running)" in found[0]
    assert "Stop slurmctld" not in shared_filesystems_host_problems([STATE_MOUNT], read(entries=["job_state"]))[0]
    found = shared_filesystems_host_problems([STATE_MOUNT], read(mounted=True, source="nfs9:/old", entries=["x"]))
    assert found and "is mounted from nfs9:/old, not nfs1:/export/alpha-state" in found[0]
    # Homes hide what was there (a site's local users' homes): the mount is what the inventory asks.
    assert shared_filesystems_host_problems([HOME], read("/home", entries=["alice"])) == []


def test_each_daemon_requires_its_mounts_and_others_lose_their_dropin():
    scratch = {"path": "/scratch", "src": "nfs1:/scratch", "purpose": "scratch"}
    gone = dict(HOME, path="/old", state="absent")
    dropins = shared_filesystems_dropins([HOME, scratch, gone], ["slurmd"])
    assert "RequiresMountsFor=/home /scratch\n" in dropins["slurmd"]
    assert dropins["slurmctld"] is None and dropins["sackd"] is None
    # slurmd's paths on a controller that runs no slurmd: no drop-in there.
    assert shared_filesystems_dropins([HOME, STATE_MOUNT], ["slurmctld"]) == {
        "slurmctld": shared_filesystems_dropins([STATE_MOUNT], ["slurmctld"])["slurmctld"],
        "slurmd": None, "slurmdbd": None, "slurmrestd": None, "sackd": None}
    assert "RequiresMountsFor=%s\n" % STATE in shared_filesystems_dropins([STATE_MOUNT], ["slurmctld"])["slurmctld"]
    assert shared_filesystems_dropins([dict(HOME, required_by=["sackd"])], ["sackd"])["sackd"]


MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 22 254:0 /var/lib/docker/volumes/alpha-state/_data /srv/lab-shared/alpha-state rw,relatime - ext4 /dev/vda rw
31 22 254:0 /var/lib/docker/volumes/alpha-state/_data /var/lib/slurm/slurmctld rw,relatime - ext4 /dev/vda rw
32 22 0:50 / /home rw,relatime - nfs4 nfs1:/export/home rw,vers=4.2,hard
33 22 254:0 /var/lib/docker/volumes/other/_data /srv/other\\040dir rw - ext4 /dev/vda rw
"""


def test_mountinfo_tells_what_is_mounted_from_where():
    info = parse_mountinfo(MOUNTINFO)
    assert "/srv/other dir" in info
    assert mounted_from(info, "/home", "nfs1:/export/home", "nfs4") == {
        "mounted": True, "from_src": True, "source": "nfs1:/export/home"}
    assert mounted_from(info, "/home", "nfs2:/export/home", "nfs4")["from_src"] is False
    # A bind mount: the same device and directory as its source.
    assert mounted_from(info, STATE, "/srv/lab-shared/alpha-state", "none")["from_src"] is True
    other = mounted_from(info, STATE, "/srv/other dir", "none")
    assert other["mounted"] and not other["from_src"] and "/var/lib/docker/volumes/alpha-state/_data" in other["source"]
    # A directory under a mount, bound elsewhere: its root is the mount's root joined with the rest of the path.
    sub = parse_mountinfo(MOUNTINFO + "34 22 254:0 /var/lib/docker/volumes/alpha-state/_data/sub /mnt/sub rw - ext4 /dev/vda rw\n")
    assert mounted_from(sub, "/mnt/sub", "/srv/lab-shared/alpha-state/sub", "none")["from_src"] is True
    assert mounted_from(info, "/scratch", "nfs1:/scratch", "nfs4") == {"mounted": False, "from_src": False, "source": None}
