"""The aws provider against moto's EC2 and SSM, served by moto's threaded server on 127.0.0.1.

Nothing here talks to AWS: every client gets the loopback server as its
endpoint, dummy credentials, no instance metadata lookups, and a before-send
hook that fails the test if a request would leave 127.0.0.1.

moto launches MinCount instances where EC2 launches as many as it can up to
MaxCount; the ``capacity`` fixture patches the in-process server to behave like
EC2 (and to run short of capacity when a test asks).
"""

from __future__ import annotations

import base64
import importlib.util
import logging
import pathlib
import re
import shutil
import subprocess
import sys
import types
import urllib.parse
import urllib.request

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parent / "src"
COLLECTION = HERE.parents[4]
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def ensure_hostlist() -> None:
    """tools/vendor.sh copies the collection's hostlist into hybridhpc_power._vendor; without it, load the original."""
    try:
        from hybridhpc_power._vendor import hostlist  # noqa: F401
    except ImportError:
        original = COLLECTION / "plugins" / "module_utils" / "hostlist.py"
        if "hybridhpc_power._vendor" not in sys.modules:
            package = types.ModuleType("hybridhpc_power._vendor")
            package.__path__ = []
            sys.modules["hybridhpc_power._vendor"] = package
        spec = importlib.util.spec_from_file_location("hybridhpc_power._vendor.hostlist", original)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["hybridhpc_power._vendor.hostlist"] = module
        sys.modules["hybridhpc_power._vendor"].hostlist = module


ensure_hostlist()

from hybridhpc_power._vendor import hostlist  # noqa: E402
from hybridhpc_power.providers import aws  # noqa: E402
from hybridhpc_power.providers.base import ProviderError, Secrets  # noqa: E402

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

REGION = "eu-west-1"
CLUSTER = "burst"
TEMPLATE = "hybridhpc-burst"
PARAMETER = "/hybridhpc/burst/munge-key"
# Bytes that would stand out anywhere: a leak in user data or a state file is found by search.
MUNGE_KEY = b"MUNGE-KEY-" + bytes(range(256)) * 4


# -- the server on loopback ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint():
    with pytest.MonkeyPatch.context() as env:
        # Dummy credentials, no profile files, no metadata service: botocore must never look beyond loopback.
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": "/nonexistent/aws-config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
            "NO_PROXY": "127.0.0.1",
            "no_proxy": "127.0.0.1",
        }.items():
            env.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env.delenv(name, raising=False)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield "http://%s:%d" % (host, port)
        finally:
            server.stop()


def loopback_only(client) -> None:
    def check(request, **_kwargs):
        host = urllib.parse.urlsplit(request.url).hostname
        assert host == "127.0.0.1", "a request to %s would leave loopback" % request.url

    client.meta.events.register("before-send", check)


def raw_client(service: str, url: str):
    client = SHARED_SESSION.client(service, region_name=REGION, endpoint_url=url)
    loopback_only(client)
    return client


# A new boto3 session reads EC2's service model again (0.2 s); the provider makes one per client.
# One session for the whole module keeps the tests fast; the clients are made the provider's way.
SHARED_SESSION = boto3.session.Session()


@pytest.fixture(autouse=True)
def shared_session(monkeypatch):
    monkeypatch.setattr(boto3.session, "Session", lambda: SHARED_SESSION)


class Capacity:
    """EC2's launch rule for the in-process moto: as many instances as asked (MaxCount), or at most ``limit``."""

    def __init__(self):
        self.limit = None
        self.fail_with = None  # (code, message): the next RunInstances answers with this error


@pytest.fixture
def capacity(monkeypatch):
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses.instances import InstanceResponse

    state = Capacity()
    original = InstanceResponse.run_instances

    def run_instances(self):
        if state.fail_with:
            code, message = state.fail_with
            state.fail_with = None
            raise EC2ClientError(code, message)
        wanted = int(self._get_param("MaxCount", if_none="1"))
        launch = wanted if state.limit is None else min(wanted, state.limit)
        get_param = self._get_param
        self._get_param = lambda name, if_none=None: str(launch) if name == "MinCount" else get_param(name, if_none)
        return original(self)

    monkeypatch.setattr(InstanceResponse, "run_instances", run_instances)
    return state


@pytest.fixture(scope="module")
def launch_template(endpoint):
    """The node set's launch template, made once: tests keep apart by cluster name and parameter (a moto reset costs seconds)."""
    ec2 = raw_client("ec2", endpoint)
    image = ec2.describe_images(Owners=["amazon"], MaxResults=5)["Images"][0]["ImageId"]
    ec2.create_launch_template(LaunchTemplateName=TEMPLATE, LaunchTemplateData={"ImageId": image, "InstanceType": "t3.micro"})
    return TEMPLATE


@pytest.fixture(scope="module")
def raw_clients(endpoint):
    return raw_client("ec2", endpoint), raw_client("ssm", endpoint)


@pytest.fixture
def aws_world(endpoint, launch_template, raw_clients, capacity, request):
    """The raw EC2/SSM clients to look at moto, and this test's own cluster and munge key parameter."""
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[-60:].strip("-")
    return types.SimpleNamespace(
        url=endpoint,
        ec2=raw_clients[0],
        ssm=raw_clients[1],
        capacity=capacity,
        cluster=name,
        parameter="/hybridhpc/%s/munge-key" % name,
    )


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "munge.key"
    path.write_bytes(MUNGE_KEY)
    path.chmod(0o400)
    return path


@pytest.fixture
def make_provider(aws_world, key_file, tmp_path):
    def make(**overrides) -> aws.AwsProvider:
        options = {
            "region": REGION,
            "endpoint_url": aws_world.url,
            "launch_template": TEMPLATE,
            "conf_server": "ctl1:6817,ctl2:6817",
            "munge_key_parameter": aws_world.parameter,
            "state_dir": str(tmp_path / "state"),
            "tags": {"team": "hpc"},
        }
        options.update(overrides)
        provider = aws.AwsProvider(aws_world.cluster, options, Secrets(str(key_file)))
        loopback_only(provider.ec2)
        loopback_only(provider.ssm)
        return provider

    return make


class Calls:
    """API calls a provider makes, counted with botocore's before-call event (one per call, retries not counted)."""

    def __init__(self, provider):
        self.names: list[str] = []
        self.params: list[tuple[str, dict]] = []
        for client in (provider.ec2, provider.ssm):
            client.meta.events.register("provide-client-params", self.record_params)
            client.meta.events.register("before-call", self.record)

    def record_params(self, model, params, **_kwargs):
        self.params.append((model.name, dict(params)))

    def record(self, model, **_kwargs):
        self.names.append(model.name)

    def count(self, name: str) -> int:
        return self.names.count(name)

    def clear(self) -> None:
        self.names.clear()
        self.params.clear()


def live_instances(world) -> list[dict]:
    filters = [
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
        {"Name": "tag:" + aws.TAG_CLUSTER, "Values": [world.cluster]},
    ]
    pages = world.ec2.get_paginator("describe_instances").paginate(Filters=filters)
    return [instance for page in pages for reservation in page["Reservations"] for instance in reservation["Instances"]]


def tags_of(instance: dict) -> dict:
    """The instance's tags but those EC2 adds itself (aws:ec2launchtemplate:id, ...)."""
    return {tag["Key"]: tag["Value"] for tag in instance.get("Tags", ()) if not tag["Key"].startswith("aws:")}


def node_of(instance: dict) -> str:
    tags = tags_of(instance)
    return hostlist.expand(tags[aws.TAG_NODES])[instance["AmiLaunchIndex"]]


# -- pure functions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nodes, max_batch, expected",
    [
        (["cloud-dy-%d" % i for i in range(1, 1001)], 500, ["cloud-dy-[1-500]", "cloud-dy-[501-1000]"]),
        (["cloud-dy-%d" % i for i in range(1, 6)], 2, ["cloud-dy-[1-2]", "cloud-dy-[3-4]", "cloud-dy-5"]),
        (["a1", "b2"], 500, ["a1,b2"]),
    ],
)
def test_plan_batches_respects_max_batch(nodes, max_batch, expected):
    assert [hostlist.compress(batch) for batch in aws.plan_batches(nodes, max_batch)] == expected


def test_plan_batches_keeps_every_tag_within_255_characters():
    nodes = aws.unique_nodes("cloud-dy-%d" % i for i in range(1, 2000, 2))  # nothing contiguous: every name costs ~5 characters
    batches = aws.plan_batches(nodes, 500)
    assert len(batches) > 2
    assert [node for batch in batches for node in batch] == nodes
    for batch in batches:
        text = hostlist.compress(batch)
        assert len(text) <= aws.TAG_VALUE_MAX
        # The batch is as long as the limit allows: one more name would not fit.
        assert batch is batches[-1] or len(hostlist.compress(batch + [nodes[nodes.index(batch[-1]) + 1]])) > aws.TAG_VALUE_MAX
        # The node reads its name back by launch index: the hostlist must expand to the batch, in order.
        assert hostlist.expand(text) == batch


def test_unique_nodes_sorts_naturally_and_drops_repeats():
    assert aws.unique_nodes(["n10", "n9", "n10", "m1"]) == ["m1", "n9", "n10"]
    # Same number, other padding: still one order (a set's order would change from run to run).
    padded = ["n1", "n01", "n001", "n0001", "n00001", "n000001"]
    assert aws.unique_nodes(padded) == aws.unique_nodes(reversed(padded)) == sorted(padded)


def test_client_token_depends_on_batch_and_attempt():
    first = aws.client_token(CLUSTER, "cloud-dy-[1-5]", "1")
    assert len(first) <= 64 and first == aws.client_token(CLUSTER, "cloud-dy-[1-5]", "1")
    assert first != aws.client_token(CLUSTER, "cloud-dy-[1-6]", "1")
    assert first != aws.client_token(CLUSTER, "cloud-dy-[1-5]", "2")
    assert first != aws.client_token("other", "cloud-dy-[1-5]", "1")


def test_user_data_holds_no_key_and_is_valid_bash(tmp_path):
    text = aws.render_user_data("cloud-dy-[1-5]", "ctl1:6817,ctl2:6817", PARAMETER, REGION)
    wire = base64.b64encode(text.encode()).decode()  # what botocore sends as UserData
    for secret in (MUNGE_KEY, base64.b64encode(MUNGE_KEY)):
        assert secret.decode("latin-1") not in text
        assert secret.decode("latin-1") not in wire
    assert "NODES='cloud-dy-[1-5]'" in text
    assert "SLURMD_OPTIONS=\"--conf-server %s -N %s\"" in text
    assert "--with-decryption" in text and "ami-launch-index" in text and "X-aws-ec2-metadata-token" in text
    assert "set +x" in text and "umask 077" in text
    script = tmp_path / "user-data"
    script.write_text(text)
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_user_data_quotes_what_it_embeds(tmp_path):
    text = aws.render_user_data("n[1-2]", "ctl:6817", "/p/it's $(reboot)", REGION)
    assert "PARAMETER='/p/it'\"'\"'s $(reboot)'" in text
    script = tmp_path / "user-data"
    script.write_text(text)
    subprocess.run(["bash", "-n", str(script)], check=True)


STUBS = {
    # Instance metadata: IMDSv2 token first, then the launch index.
    "curl": 'echo "curl $*" >> "$LOG"\ncase "$*" in *api/token*) echo tok ;; *ami-launch-index*) [ "$*" != "${*%%tok*}" ] && echo "$FAKE_INDEX" ;; esac',
    # The key reaches stdout only, as the real CLI prints it with --output text.
    "aws": 'echo "aws $*" >> "$LOG"\ncat "$FAKE_PARAMETER_VALUE"',
    # Expands like the real one (the collection's hostlist matches scontrol show hostnames).
    "scontrol": 'echo "scontrol $* SLURM_CONF_SERVER=$SLURM_CONF_SERVER" >> "$LOG"\n'
    '"$PYTHON" -c "import sys; sys.path.insert(0, sys.argv[1]); import hostlist; print(chr(10).join(hostlist.expand(sys.argv[2])))" "$HOSTLIST_DIR" "$3"',
    "install": 'echo "install $*" >> "$LOG"\nmkdir -p "${@: -1}"',
    "iptables": 'echo "iptables $*" >> "$LOG"\n[ "$1" != -C ]',
}
RECORDED = ("systemctl", "hostnamectl", "chown", "sleep")
REAL_TOOLS = ("bash", "base64", "mktemp", "chmod", "mv", "rm", "sed", "cat", "mkdir", "env")


def run_bootstrap(tmp_path, index: int, with_iptables: bool = True) -> subprocess.CompletedProcess:
    """The rendered user data under bash, every system command a stub on PATH that logs its arguments; files under tmp_path/root."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "etc" / "default").mkdir(parents=True)
    bin_dir.mkdir()
    for name, body in STUBS.items():
        if name != "iptables" or with_iptables:
            (bin_dir / name).write_text("#!/bin/bash\n" + body + "\n")
    for name in RECORDED:
        (bin_dir / name).write_text('#!/bin/bash\necho "%s $*" >> "$LOG"\n' % name)
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    for name in REAL_TOOLS:
        (bin_dir / name).symlink_to(shutil.which(name))
    value = tmp_path / "parameter-value"
    value.write_text(base64.b64encode(MUNGE_KEY).decode() + "\n")
    script = tmp_path / "user-data"
    script.write_text(aws.render_user_data("cloud-dy-[1-5],gpu-1", "ctl1:6817,ctl2:6817", PARAMETER, REGION, root=str(root)))
    env = {
        "PATH": str(bin_dir),
        "LOG": str(tmp_path / "commands.log"),
        "FAKE_INDEX": str(index),
        "FAKE_PARAMETER_VALUE": str(value),
        "PYTHON": sys.executable,
        "HOSTLIST_DIR": str(pathlib.Path(hostlist.__file__).parent),
    }
    return subprocess.run([shutil.which("bash"), str(script)], env=env, capture_output=True, timeout=30, check=False)


def test_bootstrap_joins_the_node_of_its_launch_index(tmp_path):
    done = run_bootstrap(tmp_path, index=5)
    assert done.returncode == 0, done.stderr.decode()
    root = tmp_path / "root"
    key = root / "etc" / "munge" / "munge.key"
    assert key.read_bytes() == MUNGE_KEY
    assert key.stat().st_mode & 0o777 == 0o400
    assert (root / "etc" / "default" / "slurmd").read_text() == 'SLURMD_OPTIONS="--conf-server ctl1:6817,ctl2:6817 -N gpu-1"\n'
    log = (tmp_path / "commands.log").read_text().splitlines()
    assert "hostnamectl set-hostname gpu-1" in log
    # The metadata address is closed to users before the role's credentials are used, and munge runs before slurmd.
    first = {}
    for position, line in enumerate(log):
        first.setdefault(line.split()[0] if not line.startswith("systemctl") else line, position)
    assert first["iptables"] < first["aws"] < first["systemctl restart munge"] < first["scontrol"] < first["systemctl restart slurmd"]
    assert "iptables -I OUTPUT 1 -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT" in log
    assert any(line.startswith("aws ssm get-parameter --region %s --name %s --with-decryption" % (REGION, PARAMETER)) for line in log)
    assert any("SLURM_CONF_SERVER=ctl1:6817,ctl2:6817" in line for line in log if line.startswith("scontrol"))
    # Never in an argument, never printed (a piece of it is enough to fail: base64 tools wrap lines).
    for secret in (MUNGE_KEY[:24], base64.b64encode(MUNGE_KEY)[:24], base64.b64encode(MUNGE_KEY)[-24:]):
        assert secret not in (tmp_path / "commands.log").read_bytes()
        assert secret not in done.stdout + done.stderr
    assert not list((root / "etc" / "munge").glob(".munge.key.*"))


def test_bootstrap_picks_by_launch_index(tmp_path):
    assert run_bootstrap(tmp_path, index=0).returncode == 0
    assert "-N cloud-dy-1\"" in (tmp_path / "root" / "etc" / "default" / "slurmd").read_text()


def test_bootstrap_stops_without_iptables_and_an_index_beyond_the_batch(tmp_path):
    (tmp_path / "a").mkdir()
    done = run_bootstrap(tmp_path / "a", index=0, with_iptables=False)
    assert done.returncode != 0 and b"iptables is missing" in done.stderr
    assert not (tmp_path / "a" / "root" / "etc" / "munge" / "munge.key").exists()
    (tmp_path / "b").mkdir()
    done = run_bootstrap(tmp_path / "b", index=6)
    assert done.returncode != 0 and b"launch index 6 is not in" in done.stderr
    assert not (tmp_path / "b" / "root" / "etc" / "default" / "slurmd").exists()


def test_map_instances_uses_launch_index_and_prefers_the_live_instance():
    def described(instance_id, index, state, nodes="n[1-3]", cluster=CLUSTER):
        return {
            "InstanceId": instance_id,
            "AmiLaunchIndex": index,
            "State": {"Name": state},
            "PrivateIpAddress": "10.0.0.%d" % index,
            "Tags": [{"Key": aws.TAG_CLUSTER, "Value": cluster}, {"Key": aws.TAG_NODES, "Value": nodes}],
        }

    found = aws.map_instances(
        [
            described("i-1", 0, "running"),
            described("i-2", 2, "pending"),
            described("i-3", 0, "stopped", nodes="n3"),
            described("i-4", 7, "running"),  # no node at that index
            described("i-5", 1, "running", cluster="other"),
            described("i-6", 0, "running", nodes="n[1-"),  # not a hostlist
        ],
        CLUSTER,
    )
    assert {node: [i.id for i in instances] for node, instances in found.items()} == {"n1": ["i-1"], "n3": ["i-2", "i-3"]}
    assert found["n1"][0].address == "10.0.0.0" and found["n3"][0].state == "pending"


def test_missing_instance_ids_from_the_error_message():
    assert aws.missing_instance_ids("The instance IDs 'i-0abc, i-0def' do not exist") == {"i-0abc", "i-0def"}


# -- options --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"aws_secret_access_key": "x"}, "EnvironmentFile readable by root only"),
        ({"launch_template": ""}, "set 'launch_template'"),
        ({"munge_key_parameter": None}, "set 'munge_key_parameter'"),
        ({"conf_server": "ctl 6817"}, "conf_server must be host[:port]"),
        ({"max_batch": 5000}, "max_batch must be between 1 and 1000"),
        ({"tags": {"hybridhpc:nodes": "x"}}, "set by the provider"),
    ],
)
def test_bad_options_say_what_to_fix(key_file, overrides, message):
    options = {"region": REGION, "launch_template": TEMPLATE, "conf_server": "ctl:6817", "munge_key_parameter": PARAMETER}
    options.update(overrides)
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        aws.AwsProvider(CLUSTER, options, Secrets(str(key_file)))


def test_missing_boto3_is_one_clear_error(monkeypatch, key_file):
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 now raises ImportError
    options = {"region": REGION, "launch_template": TEMPLATE, "conf_server": "c", "munge_key_parameter": PARAMETER, "state_dir": str(key_file.parent)}
    provider = aws.AwsProvider(CLUSTER, options, Secrets(str(key_file)))
    with pytest.raises(ProviderError, match=r"install boto3 \(Debian: python3-boto3\)"):
        provider.instances()


# -- against moto -----------------------------------------------------------------------------


def test_resume_starts_one_tagged_instance_per_node(make_provider, aws_world):
    provider = make_provider()
    calls = Calls(provider)
    nodes = ["cloud-dy-%d" % i for i in (3, 1, 2, 5, 4)]
    result = provider.resume(nodes)

    assert result.failed == {}
    assert sorted(result.started) == sorted(nodes)
    assert calls.names == ["PutParameter", "DescribeInstances", "RunInstances"]
    run = dict(calls.params)["RunInstances"]
    assert (run["MinCount"], run["MaxCount"]) == (1, 5)
    instances = live_instances(aws_world)
    assert len(instances) == 5
    by_id = {instance["InstanceId"]: instance for instance in instances}
    for node, started in result.started.items():
        described = by_id[started.id]
        assert node_of(described) == node
        assert tags_of(described) == {aws.TAG_CLUSTER: aws_world.cluster, aws.TAG_NODES: "cloud-dy-[1-5]", "Name": "cloud-dy-[1-5]", "team": "hpc"}
        assert started.address == described["PrivateIpAddress"]
    # The inventory read back from EC2 agrees with what resume() reported.
    assert {node: instance.id for node, instance in provider.instances().items()} == {node: i.id for node, i in result.started.items()}


def test_resume_again_launches_nothing(make_provider, aws_world):
    first = make_provider().resume(["cloud-dy-%d" % i for i in range(1, 6)])
    provider = make_provider()  # the next worker run: a new process, same state_dir
    calls = Calls(provider)
    again = provider.resume(["cloud-dy-%d" % i for i in range(1, 6)])

    assert calls.names == ["DescribeInstances"]  # key already published, every node has its instance
    assert {node: i.id for node, i in again.started.items()} == {node: i.id for node, i in first.started.items()}
    assert len(live_instances(aws_world)) == 5


def test_resume_splits_batches_when_the_hostlist_would_exceed_a_tag(make_provider, aws_world):
    provider = make_provider()
    calls = Calls(provider)
    nodes = ["cloud-dy-%05d" % i for i in range(3, 150, 3)]  # 49 names, none contiguous: ~6 characters each in the tag
    result = provider.resume(nodes)

    assert result.failed == {} and sorted(result.started) == sorted(nodes)
    assert calls.count("RunInstances") == len(aws.plan_batches(aws.unique_nodes(nodes), 500)) == 2
    instances = live_instances(aws_world)
    assert len(instances) == 49
    assert all(len(tags_of(instance)[aws.TAG_NODES]) <= aws.TAG_VALUE_MAX for instance in instances)
    assert {node: instance.id for node, instance in provider.instances().items()} == {node_of(i): i["InstanceId"] for i in instances}


def test_suspend_terminates_and_is_idempotent(make_provider, aws_world):
    provider = make_provider()
    started = provider.resume(["cloud-dy-%d" % i for i in range(1, 6)]).started
    calls = Calls(provider)
    result = provider.suspend(["cloud-dy-1", "cloud-dy-2", "cloud-dy-3", "cloud-dy-9"])

    assert sorted(result.stopped) == ["cloud-dy-1", "cloud-dy-2", "cloud-dy-3", "cloud-dy-9"] and result.failed == {}
    assert calls.names == ["DescribeInstances", "TerminateInstances"]
    assert sorted(dict(calls.params)["TerminateInstances"]["InstanceIds"]) == sorted(started[n].id for n in ("cloud-dy-1", "cloud-dy-2", "cloud-dy-3"))
    assert sorted(provider.instances()) == ["cloud-dy-4", "cloud-dy-5"]

    calls.clear()
    again = provider.suspend(["cloud-dy-1", "cloud-dy-2", "cloud-dy-3"])
    assert sorted(again.stopped) == ["cloud-dy-1", "cloud-dy-2", "cloud-dy-3"] and again.failed == {}
    assert calls.names == ["DescribeInstances"]


def test_suspend_terminates_every_instance_of_a_node(make_provider, aws_world):
    provider = make_provider()
    provider.resume(["cloud-dy-1", "cloud-dy-2"])
    # A second launch of the same batch (by hand, or a retry EC2 did not recognise) left two instances per node.
    tags = [{"Key": aws.TAG_CLUSTER, "Value": aws_world.cluster}, {"Key": aws.TAG_NODES, "Value": "cloud-dy-[1-2]"}]
    aws_world.ec2.run_instances(
        LaunchTemplate={"LaunchTemplateName": TEMPLATE}, MinCount=1, MaxCount=2, TagSpecifications=[{"ResourceType": "instance", "Tags": tags}]
    )
    assert len(live_instances(aws_world)) == 4
    assert sorted(provider.instances()) == ["cloud-dy-1", "cloud-dy-2"]  # one each: the inventory shows the most alive

    result = provider.suspend(["cloud-dy-1", "cloud-dy-2"])
    assert sorted(result.stopped) == ["cloud-dy-1", "cloud-dy-2"]
    assert live_instances(aws_world) == [] and provider.instances() == {}


def test_partial_capacity_fails_the_nodes_left_without_instance(make_provider, aws_world):
    aws_world.capacity.limit = 3
    provider = make_provider()
    nodes = ["cloud-dy-%d" % i for i in range(1, 6)]
    result = provider.resume(nodes)

    assert sorted(result.started) == nodes[:3]  # launch indexes 0..2 are the batch's first three nodes
    assert sorted(result.failed) == nodes[3:]
    assert all("launched 3 of 5" in reason for reason in result.failed.values())
    assert sorted(provider.instances()) == nodes[:3]

    # The next attempt starts only the two missing ones.
    aws_world.capacity.limit = None
    calls = Calls(provider)
    retry = provider.resume(nodes)
    assert retry.failed == {} and sorted(retry.started) == nodes
    assert dict(calls.params)["RunInstances"]["MaxCount"] == 2
    assert len(live_instances(aws_world)) == 5


def test_a_refused_batch_fails_its_nodes_and_the_others_go_on(make_provider, aws_world):
    aws_world.capacity.fail_with = ("InsufficientInstanceCapacity", "We currently do not have sufficient capacity")
    provider = make_provider(max_batch=3)
    calls = Calls(provider)
    nodes = ["cloud-dy-%d" % i for i in range(1, 7)]
    result = provider.resume(nodes)

    assert calls.count("RunInstances") == 2
    assert result.failed == dict.fromkeys(nodes[:3], "InsufficientInstanceCapacity")
    assert sorted(result.started) == nodes[3:]
    assert sorted(provider.instances()) == nodes[3:]


def test_a_launch_without_answer_is_retried_with_its_client_token(make_provider, aws_world):
    from botocore.exceptions import ReadTimeoutError

    provider = make_provider(max_batch=2)
    calls = Calls(provider)
    unanswered = []

    def lose_the_answer(**_kwargs):
        if not unanswered:
            unanswered.append(True)
            raise ReadTimeoutError(endpoint_url=aws_world.url)

    provider.ec2.meta.events.register("after-call.ec2.RunInstances", lose_the_answer)
    # EC2 is eventually consistent: the instances launched without answer may not be listed yet.
    provider.ec2.meta.events.register("after-call.ec2.DescribeInstances", lambda parsed, **_k: parsed.update(Reservations=[]))
    nodes = ["cloud-dy-1", "cloud-dy-2", "cloud-dy-3"]
    first = provider.resume(nodes)
    assert sorted(first.failed) == nodes and "no answer" in first.failed["cloud-dy-1"]
    assert "not attempted" in first.failed["cloud-dy-3"]
    assert calls.count("RunInstances") == 1

    retried = provider.resume(nodes)  # the same batch: EC2 would return the first call's instances
    tokens = [params["ClientToken"] for name, params in calls.params if name == "RunInstances"]
    assert tokens[0] == tokens[1] and tokens[2] != tokens[0]
    assert sorted(retried.started) == nodes

    # Answered: settled. A later resume of the same nodes (after a suspend) is a new launch with a new token.
    calls.clear()
    provider.resume(nodes)
    assert [params["ClientToken"] for name, params in calls.params if name == "RunInstances"][0] != tokens[0]


def test_resume_replaces_an_instance_someone_stopped(make_provider, aws_world):
    provider = make_provider()
    old = provider.resume(["cloud-dy-1"]).started["cloud-dy-1"]
    aws_world.ec2.stop_instances(InstanceIds=[old.id])
    assert provider.instances()["cloud-dy-1"].state in ("stopping", "stopped")

    new = provider.resume(["cloud-dy-1"]).started["cloud-dy-1"]
    assert new.id != old.id
    states = {i["InstanceId"]: i["State"]["Name"] for r in aws_world.ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert states[old.id] in ("shutting-down", "terminated")
    assert provider.instances()["cloud-dy-1"].id == new.id


def test_terminate_skips_instances_already_gone(make_provider, aws_world):
    provider = make_provider()
    started = provider.resume(["cloud-dy-1", "cloud-dy-2"]).started
    gone = started["cloud-dy-1"].id
    aws_world.ec2.terminate_instances(InstanceIds=[gone])
    # DescribeInstances answered before the instance went away: the provider still sees it.
    stale = aws_world.ec2.describe_instances(InstanceIds=[gone])["Reservations"]
    for reservation in stale:
        for instance in reservation["Instances"]:
            instance["State"] = {"Code": 16, "Name": "running"}
    provider.ec2.meta.events.register("after-call.ec2.DescribeInstances", lambda parsed, **_k: parsed["Reservations"].extend(stale))

    class NotFound:
        status_code = 400

    answered = []

    def not_found_once(params, **_kwargs):
        if gone in params["body"]["InstanceId.1"] + params["body"].get("InstanceId.2", "") and not answered:
            answered.append(True)
            return NotFound(), {"Error": {"Code": "InvalidInstanceID.NotFound", "Message": "The instance ID '%s' does not exist" % gone}}
        return None

    provider.ec2.meta.events.register("before-call.ec2.TerminateInstances", not_found_once)
    calls = Calls(provider)
    result = provider.suspend(["cloud-dy-1", "cloud-dy-2"])
    assert result.failed == {} and sorted(result.stopped) == ["cloud-dy-1", "cloud-dy-2"]
    assert [params["InstanceIds"] for name, params in calls.params if name == "TerminateInstances"][-1] == [started["cloud-dy-2"].id]


def test_user_data_of_launched_instances_holds_no_key(make_provider, aws_world):
    provider = make_provider()
    started = provider.resume(["cloud-dy-1", "cloud-dy-2"]).started
    for instance in started.values():
        attribute = aws_world.ec2.describe_instance_attribute(InstanceId=instance.id, Attribute="userData")
        text = base64.b64decode(attribute["UserData"]["Value"])
        assert text.startswith(b"#!/bin/bash") and b"NODES='cloud-dy-[1-2]'" in text
        assert MUNGE_KEY not in text and base64.b64encode(MUNGE_KEY) not in text
        assert base64.b64encode(MUNGE_KEY) not in attribute["UserData"]["Value"].encode()


def test_publish_munge_key_puts_it_once(make_provider, aws_world, key_file, tmp_path):
    provider = make_provider()
    calls = Calls(provider)
    assert provider.publish_munge_key() is True
    assert calls.names == ["PutParameter"]
    parameter = aws_world.ssm.get_parameter(Name=aws_world.parameter, WithDecryption=True)["Parameter"]
    assert parameter["Type"] == "SecureString"
    assert base64.b64decode(parameter["Value"]) == MUNGE_KEY
    assert provider.publish_munge_key() is False

    later = make_provider()  # another worker run: remembers through state_dir
    later_calls = Calls(later)
    assert later.publish_munge_key() is False
    assert later_calls.names == []
    for state in (tmp_path / "state").iterdir():
        content = state.read_bytes()
        assert MUNGE_KEY not in content and base64.b64encode(MUNGE_KEY) not in content
        assert state.stat().st_mode & 0o077 == 0

    # A new key is published again.
    key_file.chmod(0o600)
    key_file.write_bytes(b"another key" * 100)
    assert later.publish_munge_key() is True
    assert later_calls.names == ["PutParameter"]
    assert base64.b64decode(aws_world.ssm.get_parameter(Name=aws_world.parameter, WithDecryption=True)["Parameter"]["Value"]) == b"another key" * 100


def test_an_unwritable_state_dir_costs_calls_not_resumes(make_provider, aws_world, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    provider = make_provider(state_dir=str(blocker / "state"))
    calls = Calls(provider)
    result = provider.resume(["cloud-dy-1"])
    assert result.failed == {} and list(result.started) == ["cloud-dy-1"]
    assert provider.publish_munge_key() is False  # remembered in memory for this run
    assert calls.count("PutParameter") == 1


def test_unpublished_key_fails_every_node_without_launching(make_provider, aws_world):
    provider = make_provider(munge_key_kms_key_id="alias/does-not-exist")
    calls = Calls(provider)

    def refuse(**_kwargs):
        class Forbidden:
            status_code = 400

        return Forbidden(), {"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}

    provider.ssm.meta.events.register("before-call.ssm.PutParameter", refuse)
    result = provider.resume(["cloud-dy-1", "cloud-dy-2"])
    assert result.started == {}
    assert result.failed == dict.fromkeys(["cloud-dy-1", "cloud-dy-2"], "munge key not published: PutParameter %s: AccessDeniedException" % aws_world.parameter)
    assert "RunInstances" not in calls.names and live_instances(aws_world) == []


def test_describe_failure_is_a_provider_error(make_provider):
    provider = make_provider()

    def refuse(**_kwargs):
        class Unauthorized:
            status_code = 403

        return Unauthorized(), {"Error": {"Code": "UnauthorizedOperation", "Message": "not allowed"}}

    provider.ec2.meta.events.register("before-call.ec2.DescribeInstances", refuse)
    with pytest.raises(ProviderError, match="DescribeInstances: UnauthorizedOperation"):
        provider.suspend(["cloud-dy-1"])
    with pytest.raises(ProviderError, match="DescribeInstances: UnauthorizedOperation"):
        provider.resume(["cloud-dy-1"])
