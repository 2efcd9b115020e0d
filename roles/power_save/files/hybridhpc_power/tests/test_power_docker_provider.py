"""The docker provider's decisions against an in-memory Engine API (the live daemon test is test_docker_provider_live.py)."""

from __future__ import annotations

import io
import itertools
import tarfile

import pytest

from hybridhpc_power import names
from hybridhpc_power.providers.base import Secrets
from hybridhpc_power.providers.docker import FOREIGN, DockerError, DockerProvider, node_files

KEY = bytes(range(256)) * 4


class FakeDockerApi:
    """Containers by id; names unique like dockerd's. ``fail`` maps (method, node) -> DockerError."""

    def __init__(self):
        self.containers_by_id: dict[str, dict] = {}
        self.calls: list[tuple] = []
        self.fail: dict[tuple[str, str], DockerError] = {}
        self._ids = itertools.count(1)

    def _by_name(self, name):
        return next((c for c in self.containers_by_id.values() if c["Name"] == name), None)

    def _get(self, ref):
        return self.containers_by_id.get(ref) or self._by_name(ref)

    def _check(self, method, ref):
        self.calls.append((method, ref))
        container = self._get(ref)
        key = (method, container["Name"] if container else ref)
        if key in self.fail:
            raise self.fail[key]

    def add(self, name, labels, status="running"):
        cid = "c%04d" % next(self._ids)
        self.containers_by_id[cid] = {"Id": cid, "Name": name, "Labels": dict(labels), "Status": status, "files": {}, "spec": None}
        return cid

    def containers(self, labels):
        self.calls.append(("containers", tuple(labels)))
        out = []
        for c in self.containers_by_id.values():
            if all(c["Labels"].get(k) == v for k, v in (label.split("=", 1) for label in labels)):
                out.append({"Id": c["Id"], "Names": ["/" + c["Name"]], "Labels": c["Labels"], "State": c["Status"], "Created": 17,
                            "NetworkSettings": {"Networks": {"lab": {"IPAddress": "172.18.0.%s" % int(c["Id"][1:])}}}})
        return out

    def inspect(self, ref):
        self._check("inspect", ref)
        c = self._get(ref)
        if c is None:
            return None
        return {"Id": c["Id"], "Name": "/" + c["Name"], "Config": {"Labels": c["Labels"]},
                "State": {"Status": c["Status"], "Running": c["Status"] == "running"},
                "NetworkSettings": {"Networks": {"lab": {"IPAddress": "172.18.0.%s" % int(c["Id"][1:])}}}}

    def create(self, name, spec):
        self._check("create", name)
        if self._by_name(name):
            raise DockerError(409, 'Conflict. The container name "/%s" is already in use' % name)
        cid = self.add(name, spec["Labels"], "created")
        self.containers_by_id[cid]["spec"] = spec
        return cid

    def put_archive(self, cid, path, tar):
        self._check("put_archive", cid)
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            for member in archive.getmembers():
                data = archive.extractfile(member).read() if member.isfile() else None
                self.containers_by_id[cid]["files"][path.rstrip("/") + "/" + member.name] = (member.mode, member.uid, member.gid, data)

    def start(self, cid):
        self._check("start", cid)
        self.containers_by_id[cid]["Status"] = "running"

    def remove(self, cid):
        self._check("remove", cid)
        return self.containers_by_id.pop(cid, None) is not None


OPTIONS = {"image": "lab/compute", "network": "lab", "conf_server": "ctl1:6817", "munge_uid": 104, "munge_gid": 105}


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "munge.key"
    path.write_bytes(KEY)
    return str(path)


def make(key_file, api=None, cgroup_v2=False, **options):
    return DockerProvider("t", {**OPTIONS, **options}, Secrets(key_file), api=api or FakeDockerApi(), cgroup_v2_host=cgroup_v2)


def ours(node):
    return {names.LABEL_CLUSTER: "t", names.LABEL_NODE: node}


def test_resume_creates_copies_the_files_then_starts(key_file):
    provider = make(key_file)
    api = provider.api
    result = provider.resume(["c1", "c2"])
    assert result.failed == {} and sorted(result.started) == ["c1", "c2"]
    assert result.started["c1"].state == "running" and result.started["c1"].address.startswith("172.18.0.")
    container = api._by_name("c1")
    assert container["files"]["/etc/munge/munge.key"] == (0o400, 104, 105, KEY)
    assert container["files"]["/etc/munge"][:3] == (0o700, 104, 105)
    assert container["files"]["/etc/default/slurmd"] == (0o644, 0, 0, b'SLURMD_OPTIONS="--conf-server ctl1:6817 -N c1 -b"\n')
    steps = [c[0] for c in api.calls if c[1] in ("c1", container["Id"])]
    assert steps.index("put_archive") < steps.index("start"), "the key must be in place before the container boots"


def test_the_key_is_nowhere_in_the_create_request(key_file):
    provider = make(key_file)
    provider.resume(["c1"])
    spec = repr(provider.api._by_name("c1")["spec"])
    import base64
    assert KEY.hex() not in spec and base64.b64encode(KEY).decode() not in spec and "munge.key" not in spec


def test_the_container_spec(key_file):
    provider = make(key_file, labels={"lab": "yes"}, cap_add=["SYS_NICE"], security_opt=["seccomp=unconfined"],
                    devices=["/dev/fuse", "/dev/loop0:/dev/loop9:rw"], tmpfs={"/scratch": "size=1g", "/tmp": "size=2g"},
                    binds=["/srv/home:/home"])
    spec = provider.spec("c7")
    assert spec["Image"] == "lab/compute" and spec["Hostname"] == "c7"
    assert spec["Labels"] == {"lab": "yes", names.LABEL_CLUSTER: "t", names.LABEL_NODE: "c7"}
    assert spec["NetworkingConfig"] == {"EndpointsConfig": {"lab": {"Aliases": ["c7"]}}}
    host = spec["HostConfig"]
    assert host["NetworkMode"] == "lab" and host["CgroupnsMode"] == "host" and host["CapAdd"] == ["SYS_NICE"]
    assert host["SecurityOpt"] == ["seccomp=unconfined"]
    assert host["Devices"] == [{"PathOnHost": "/dev/fuse", "PathInContainer": "/dev/fuse", "CgroupPermissions": "rwm"},
                               {"PathOnHost": "/dev/loop0", "PathInContainer": "/dev/loop9", "CgroupPermissions": "rw"}]
    assert host["Tmpfs"] == {"/run": "", "/run/lock": "", "/tmp": "size=2g", "/scratch": "size=1g"}
    assert host["Binds"] == ["/sys/fs/cgroup:/sys/fs/cgroup:ro", "/srv/home:/home"]
    assert "Env" not in spec and "Privileged" not in host


@pytest.mark.parametrize("v2,mode,expected", [
    (False, "auto", "ro"), (True, "auto", "rw"), (False, "rw", "rw"), (True, "ro", "ro"),
])
def test_the_cgroup_mount_follows_the_host(key_file, v2, mode, expected):
    host = make(key_file, cgroup_v2=v2, cgroup_mount=mode).spec("c1")["HostConfig"]
    assert host["Binds"] == ["/sys/fs/cgroup:/sys/fs/cgroup:" + expected]


def test_without_systemd_no_cgroup_mount_and_no_tmpfs(key_file):
    host = make(key_file, systemd=False).spec("c1")["HostConfig"]
    assert host["Binds"] == [] and host["Tmpfs"] == {}


def test_resume_is_idempotent_for_our_running_container(key_file):
    provider = make(key_file)
    first = provider.resume(["c1"]).started["c1"]
    provider.api.calls.clear()
    again = provider.resume(["c1"]).started["c1"]
    assert again.id == first.id and [c[0] for c in provider.api.calls if c[0] in ("create", "start", "put_archive")] == []


def test_resume_starts_our_stopped_container_again(key_file):
    provider = make(key_file)
    cid = provider.api.add("c1", ours("c1"), "exited")
    result = provider.resume(["c1"])
    assert result.started["c1"].id == cid and result.started["c1"].state == "running"
    assert ("create", "c1") not in provider.api.calls and provider.api.containers_by_id[cid]["files"]


@pytest.mark.parametrize("labels", [{}, {names.LABEL_CLUSTER: "other", names.LABEL_NODE: "c1"}, {names.LABEL_CLUSTER: "t", names.LABEL_NODE: "c9"}])
def test_a_container_of_that_name_we_did_not_create_fails_the_node_and_is_left_alone(key_file, labels):
    provider = make(key_file)
    cid = provider.api.add("c1", labels, "exited")
    result = provider.resume(["c1", "c2"])
    assert result.failed == {"c1": FOREIGN} and list(result.started) == ["c2"]
    assert provider.api.containers_by_id[cid]["Status"] == "exited" and provider.api.containers_by_id[cid]["files"] == {}
    assert provider.suspend(["c1"]).stopped == ["c1"] and cid in provider.api.containers_by_id


def test_one_failing_node_does_not_fail_the_batch_and_leaves_nothing_behind(key_file):
    provider = make(key_file)
    provider.api.fail[("start", "c2")] = DockerError(500, "error gathering device information")
    result = provider.resume(["c1", "c2", "c3"])
    assert sorted(result.started) == ["c1", "c3"]
    assert result.failed == {"c2": "cannot start the container: docker API 500: error gathering device information"}
    assert provider.api._by_name("c2") is None  # the half-made container was removed


def test_an_unreadable_munge_key_fails_every_node_without_content(tmp_path):
    provider = make(str(tmp_path / "missing.key"))
    result = provider.resume(["c1"])
    assert result.failed == {"c1": "cannot read the munge key file %s: No such file or directory" % (tmp_path / "missing.key")}


def test_suspend_removes_our_containers_and_counts_missing_ones_as_stopped(key_file):
    provider = make(key_file)
    provider.resume(["c1", "c2"])
    result = provider.suspend(["c1", "c2", "c3"])
    assert result.stopped == ["c1", "c2", "c3"] and result.failed == {}
    assert provider.instances() == {}


def test_a_failed_removal_fails_only_that_node(key_file):
    provider = make(key_file)
    provider.resume(["c1", "c2"])
    provider.api.fail[("remove", "c1")] = DockerError(409, "removal of container c1 is already in progress")
    result = provider.suspend(["c1", "c2"])
    assert result.stopped == ["c2"] and "already in progress" in result.failed["c1"]


def test_instances_lists_this_clusters_containers_with_mapped_states(key_file):
    provider = make(key_file)
    provider.resume(["c1"])
    provider.api.add("c2", ours("c2"), "exited")
    provider.api.add("x1", {names.LABEL_CLUSTER: "other", names.LABEL_NODE: "x1"})
    provider.api.add("y1", {})
    got = provider.instances()
    assert sorted(got) == ["c1", "c2"]
    assert got["c1"].state == "running" and got["c2"].state == "stopped" and got["c1"].created == 17.0


@pytest.mark.parametrize("options,message", [
    ({"image": ""}, "image is required"),
    ({"network": None}, "network is required"),
    ({"munge_uid": -1}, "munge_uid must be an integer"),
    ({"munge_gid": "105"}, "munge_gid must be an integer"),
    ({"labels": {names.LABEL_CLUSTER: "x"}}, "labels must not set"),
    ({"cap_add": "SYS_NICE"}, "cap_add must be a list"),
    ({"tmpfs": {"run": ""}}, "tmpfs must map absolute paths"),
    ({"cgroup_mount": "yes"}, "cgroup_mount must be auto, ro or rw"),
    ({"privileged": True}, "unknown option privileged"),
    ({"socket": "docker.sock"}, "socket must be the absolute path"),
])
def test_bad_options_name_the_option(key_file, options, message):
    with pytest.raises(ValueError, match=message):
        make(key_file, **options)


def test_missing_munge_ids_say_how_to_find_them(key_file):
    options = dict(OPTIONS)
    del options["munge_uid"]
    with pytest.raises(ValueError, match="munge_uid is required.*id -u munge"):
        DockerProvider("t", options, Secrets(key_file), api=FakeDockerApi())


def test_node_files_is_a_plain_tar_with_three_entries():
    with tarfile.open(fileobj=io.BytesIO(node_files(b"k", 1, 2, "ctl", "n1"))) as tar:
        assert [(m.name, oct(m.mode)) for m in tar.getmembers()] == [
            ("etc/munge", "0o700"), ("etc/munge/munge.key", "0o400"), ("etc/default/slurmd", "0o644")]
