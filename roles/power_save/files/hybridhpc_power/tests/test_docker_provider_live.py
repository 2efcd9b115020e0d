"""The docker provider against this machine's real Docker daemon (skipped without /var/run/docker.sock).

Uses the lab image named in the collection's .lab-image, a throwaway network
and names starting with ``h1-test-``; removes everything it made. About 10 s.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import secrets
import shutil
import subprocess

import pytest

from hybridhpc_power import names
from hybridhpc_power.providers.base import Secrets
from hybridhpc_power.providers.docker import FOREIGN, DockerProvider

SOCKET = "/var/run/docker.sock"
IMAGE_FILE = pathlib.Path(__file__).resolve().parents[5] / ".lab-image"

pytestmark = [
    pytest.mark.skipif(not os.path.exists(SOCKET), reason="no Docker daemon socket at %s: the live docker provider test needs one" % SOCKET),
    pytest.mark.skipif(shutil.which("docker") is None, reason="the docker CLI is needed to check what the provider did"),
    pytest.mark.skipif(not IMAGE_FILE.exists(), reason="no .lab-image at the collection root: build the lab image first (make lab-image)"),
]


def docker(*args, check=True, binary=False):
    done = subprocess.run(["docker", *args], capture_output=True, text=not binary, timeout=60)
    if check and done.returncode != 0:
        raise AssertionError("docker %s: %s" % (" ".join(args), done.stderr))
    return done


@pytest.fixture
def live(tmp_path):
    image = IMAGE_FILE.read_text().strip()
    if docker("image", "inspect", image, check=False).returncode != 0:
        pytest.skip("the lab image %s is not built on this machine" % image)
    tag = "h1-test-" + secrets.token_hex(4)
    key = secrets.token_bytes(1020) + b"MUNGE-KEY-MARKER"
    key_file = tmp_path / "munge.key"
    key_file.write_bytes(key)
    docker("network", "create", tag)
    nodes = [tag + "-n1", tag + "-n2", tag + "-n3"]
    provider = DockerProvider(tag, {"image": image, "network": tag, "conf_server": "ctl.invalid", "munge_uid": 4242, "munge_gid": 4243,
                                    "cap_add": ["SYS_NICE"], "labels": {"purpose": "hybridhpc-power live test"}, "timeout": 30},
                              Secrets(str(key_file)))
    try:
        yield provider, nodes, key
    finally:
        for node in nodes:
            docker("rm", "-f", node, check=False)
        docker("network", "rm", tag, check=False)


def test_resume_list_idempotence_foreign_names_and_suspend(live):
    provider, (n1, n2, n3), key = live

    result = provider.resume([n1, n2])
    assert result.failed == {} and sorted(result.started) == [n1, n2]
    assert all(i.state == "running" and i.address for i in result.started.values())

    for node in (n1, n2):
        assert docker("exec", node, "stat", "-c", "%a %u %g", "/etc/munge/munge.key").stdout.split() == ["400", "4242", "4243"]
        assert docker("exec", node, "cat", "/etc/munge/munge.key", binary=True).stdout == key
        assert docker("exec", node, "cat", "/etc/default/slurmd").stdout == 'SLURMD_OPTIONS="--conf-server ctl.invalid -N %s -b"\n' % node
        assert docker("exec", node, "hostname").stdout.strip() == node
        inspected = docker("inspect", node, binary=True).stdout
        for form in (key, base64.b64encode(key), key.hex().encode(), b"MUNGE-KEY-MARKER"):
            assert form not in inspected, "the munge key shows in docker inspect"
        labels = json.loads(inspected)[0]["Config"]["Labels"]
        assert labels[names.LABEL_CLUSTER] == provider.cluster and labels[names.LABEL_NODE] == node
        assert "hybridhpc.lab" not in labels

    # The alias makes the node name resolve on the network.
    assert docker("exec", n1, "getent", "hosts", n2).stdout.split()[0] == result.started[n2].address

    listed = provider.instances()
    assert sorted(listed) == [n1, n2] and {i.id for i in listed.values()} == {i.id for i in result.started.values()}

    again = provider.resume([n1, n2])
    assert {n: i.id for n, i in again.started.items()} == {n: i.id for n, i in result.started.items()}

    docker("create", "--name", n3, IMAGE_FILE.read_text().strip())
    foreign = provider.resume([n3])
    assert foreign.failed == {n3: FOREIGN} and foreign.started == {}

    gone = provider.suspend([n1, n2, n3])
    assert sorted(gone.stopped) == [n1, n2, n3] and gone.failed == {}
    assert provider.instances() == {}
    assert docker("inspect", n1, check=False).returncode != 0
    assert docker("inspect", n3).returncode == 0, "a container we did not create was removed"
