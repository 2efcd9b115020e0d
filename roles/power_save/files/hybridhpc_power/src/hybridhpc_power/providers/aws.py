"""EC2 instances behind the elastic nodes of one node set (the ``aws`` provider), through boto3.

How a node comes up
-------------------
``resume()`` starts the nodes of a request in batches, one RunInstances call
per batch (MinCount=1, MaxCount=len(batch)). A batch's instances carry the tags
``hybridhpc:cluster`` (the cluster) and ``hybridhpc:nodes`` (the batch's
hostlist, compressed); EC2 numbers the instances of one call 0..n-1
(AmiLaunchIndex), so instance *i* is the batch's node *i*. That pair of tags is
the provider's whole inventory: ``instances()`` reads it back, nothing is kept
locally. All instances of a batch get the same user data: a bootstrap (no
secret in it) that reads its launch index from the instance metadata, picks
its node name from the hostlist it carries, fetches the munge key from SSM
Parameter Store with the instance's role and starts munge and slurmd in
configless mode (``--conf-server``).

The munge key reaches the nodes through one SSM SecureString parameter
(``munge_key_parameter``), written by ``publish_munge_key()`` from the
controller's key file; the key is never in user data, a tag, a process
argument or a log line.

Options (the node set's ``options``)
------------------------------------
region                   AWS region of the instances and the parameter (required)
launch_template          name or id (lt-...) of the launch template: image, instance
                         profile, security groups, MetadataOptions (required)
launch_template_version  default "$Default"
instance_type, subnet_id override the launch template's
max_batch                nodes per RunInstances call (default 500, at most 1000)
tags                     extra tags on instances and volumes ({key: value})
conf_server              slurmctld for ``slurmd --conf-server``: "ctl:6817[,ctl2:6817]" (required)
munge_key_parameter      name of the SSM SecureString parameter for the key (required)
munge_key_kms_key_id     KMS key of that parameter (default: the account's aws/ssm key)
state_dir                where small state files go (default /var/lib/hybridhpc-power)
endpoint_url             EC2 and SSM endpoint (VPC endpoints without private DNS, tests);
                         ec2_endpoint_url / ssm_endpoint_url set one each

The image needs bash, curl, iptables, the AWS CLI, munge, slurmd and
scontrol, and must not start slurmd before the bootstrap has written
/etc/default/slurmd.

Trust model
-----------
Credentials: boto3's default chain on the controller, never this provider's
options (the node set's config file is readable by more than root, and is
rendered by Ansible into logs and diffs). Use either the controller's
instance profile (on EC2), or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in a
systemd EnvironmentFile owned by root with mode 0600 (outside EC2). Options
that look like credentials are refused.

The worker (controller side) needs, and should get, no more than::

    ec2:RunInstances        on the launch template, image, subnet, security
                            groups, network interfaces, volumes and instances
                            (for instance/*: Condition StringEquals
                            aws:RequestTag/hybridhpc:cluster = <cluster>)
    ec2:CreateTags          on instance/* and volume/*, Condition StringEquals
                            ec2:CreateAction = RunInstances (tags at launch only)
    ec2:DescribeInstances   (no resource-level permissions exist: "*")
    ec2:TerminateInstances  on instance/*, Condition StringEquals
                            aws:ResourceTag/hybridhpc:cluster = <cluster>
    ssm:PutParameter        on that one parameter's ARN
                            (+ kms:Encrypt on its key when it is a customer managed key)
    iam:PassRole            on the role of the launch template's instance
                            profile, Condition iam:PassedToService = ec2.amazonaws.com

The nodes (the launch template's instance profile) need only::

    ssm:GetParameter        on that one parameter's ARN
    kms:Decrypt             on the parameter's KMS key when it is a customer
                            managed key (Condition
                            kms:EncryptionContext:PARAMETER_ARN = that ARN)

and no EC2 permission at all. Any process that reaches the instance metadata
service can use the node's role, so the bootstrap first allows the metadata
address to root only (iptables owner match), before jobs can run: a user's job
must not read the munge key (it would let them forge credentials for any uid).
Set ``HttpPutResponseHopLimit=1`` in the launch template too, so containers
cannot reach it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import shlex
import time
from typing import Iterable, Mapping, Sequence

# The vendored module itself, not hybridhpc_power.hostlists: a batch's tag must
# keep the batch's order (compress without sorting), since launch index i is
# the i-th name of the expanded tag.
from hybridhpc_power import names
from hybridhpc_power._vendor import hostlist
from hybridhpc_power.files import write_atomically
from hybridhpc_power.providers.base import Instance, Provider, ProviderError, ResumeResult, Secrets, SuspendResult

LOG = logging.getLogger(__name__)

TAG_CLUSTER = "hybridhpc:cluster"
TAG_NODES = "hybridhpc:nodes"
# EC2 allows tag values of up to 256 characters; one is kept in hand.
TAG_VALUE_MAX = 255
# EC2's own limits: TerminateInstances takes at most 1,000 ids, DescribeInstances
# returns at most 1,000 instances per page; ClientToken is at most 64 ASCII characters.
TERMINATE_MAX = 1000
DESCRIBE_PAGE = 1000
# One RunInstances call asks EC2 for this many instances at most (option max_batch).
DEFAULT_MAX_BATCH = 500
# An SSM parameter value: 4 KB in the standard tier, 8 KB in the advanced one.
SSM_STANDARD_MAX, SSM_ADVANCED_MAX = 4096, 8192
# A RunInstances call whose answer never came may have launched instances: the
# retry reuses its client token (EC2 then answers with the first call's
# instances instead of launching again) for this long; after that, the
# instances it launched show in DescribeInstances and resume() skips their nodes.
UNSETTLED_TOKEN_TTL = 3600

# Where the small state files go when the options do not say (the directory of
# the configuration's default state_file).
DEFAULT_STATE_DIR = "/var/lib/hybridhpc-power"

# EC2 instance states that still hold a node: a terminated or shutting-down one no longer does.
LIVE_STATES = ("pending", "running", "stopping", "stopped")
STATES = {
    "pending": names.INSTANCE_PENDING,
    "running": names.INSTANCE_RUNNING,
    "stopping": names.INSTANCE_STOPPING,
    "stopped": names.INSTANCE_STOPPED,
    "shutting-down": names.INSTANCE_STOPPING,
    "terminated": names.INSTANCE_TERMINATED,
}
# When a node has more than one instance (a launch retried by hand, a stopped
# instance left behind), instances() reports the one most alive.
STATE_RANK = {
    names.INSTANCE_RUNNING: 0,
    names.INSTANCE_PENDING: 1,
    names.INSTANCE_STOPPING: 2,
    names.INSTANCE_STOPPED: 3,
    names.INSTANCE_TERMINATED: 4,
}

CREDENTIAL_OPTIONS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token", "access_key", "secret_key", "secret_access_key")
MISSING_BOTO3 = "the aws provider needs boto3: install boto3 (Debian: python3-boto3)"


# -- pure functions ---------------------------------------------------------------------------


def natural_key(name: str) -> tuple:
    """Sort key that puts cloud-dy-9 before cloud-dy-10, so a request compresses into the fewest ranges.

    re.split keeps text at even and numbers at odd positions, so two keys
    always compare str with str and int with int; the name itself breaks the
    tie between n1 and n01.
    """
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)), name


def unique_nodes(nodes: Iterable[str]) -> list[str]:
    """The request's nodes once each, in natural order: batches (and their client tokens) do not depend on how requests were merged."""
    return sorted(set(nodes), key=natural_key)


def longest_prefix_within(nodes: Sequence[str], start: int, max_batch: int, limit: int = TAG_VALUE_MAX) -> int:
    """How many nodes from ``start`` on form one batch: at most max_batch, their hostlist at most ``limit`` characters.

    Appending a name to a hostlist never shortens it (order is kept, ranges
    only grow), so the length is monotonic and a binary search needs
    log2(max_batch) compressions instead of one per node.
    """
    low, high = 1, min(max_batch, len(nodes) - start)
    while low < high:
        middle = (low + high + 1) // 2
        if len(hostlist.compress(nodes[start : start + middle])) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def plan_batches(nodes: Sequence[str], max_batch: int, limit: int = TAG_VALUE_MAX) -> list[list[str]]:
    """Split nodes (already unique and ordered) into RunInstances batches: ≤ max_batch nodes, hostlist ≤ limit characters.

    Names longer than ``limit`` cannot be tagged at all: leave them out first (see resume()).
    """
    batches, start = [], 0
    while start < len(nodes):
        size = longest_prefix_within(nodes, start, max_batch, limit)
        batches.append(list(nodes[start : start + size]))
        start += size
    return batches


def client_token(cluster: str, batch_hostlist: str, nonce: str) -> str:
    """The RunInstances ClientToken of one launch attempt of a batch (64 hex characters, EC2's maximum length).

    The nonce makes a later resume of the same nodes (after they were
    suspended) a new launch: EC2 would answer a reused token with the old,
    terminated instances.
    """
    return hashlib.sha256("\0".join((cluster, batch_hostlist, nonce)).encode()).hexdigest()


def render_user_data(batch_hostlist: str, conf_server: str, parameter: str, region: str, root: str = "") -> str:
    """The bootstrap every instance of a batch runs at first boot (cloud-init runs user data as root).

    Holds no secret: the munge key comes from SSM at boot, through a pipe into
    the key file (never echoed, never a command argument). Order matters: the
    key and munge come before the node name because ``scontrol show
    hostnames`` on a configless node fetches slurm.conf from slurmctld
    (SLURM_CONF_SERVER), which needs munge. ``root`` prefixes the files it
    writes (a test runs the script in a directory; instances get "").
    """
    values = {
        "NODES": batch_hostlist,
        "CONF_SERVER": conf_server,
        "PARAMETER": parameter,
        "REGION": region,
        "ROOT": root,
    }
    assignments = "\n".join("%s=%s" % (name, shlex.quote(value)) for name, value in values.items())
    return USER_DATA_TEMPLATE.replace("@ASSIGNMENTS@", assignments)


USER_DATA_TEMPLATE = r"""#!/bin/bash
# hybridhpc.slurm power_save (aws provider): join this instance to Slurm as
# node number <ami-launch-index> of $NODES. No secret is written here.
set -euo pipefail
set +x
@ASSIGNMENTS@
fail() { echo "hybridhpc-bootstrap: $*" >&2; exit 1; }

# The node's role can read the munge key: only root may reach the metadata service.
if command -v iptables >/dev/null; then
    iptables -C OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT 2>/dev/null \
        || iptables -I OUTPUT 1 -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT
else
    fail "iptables is missing: cannot keep users away from the instance metadata service (and the munge key)"
fi

TOKEN=$(curl -fsS --retry 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)
INDEX=$(curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/ami-launch-index)
case $INDEX in ''|*[!0-9]*) fail "no ami-launch-index in the instance metadata" ;; esac

# The instance role's credentials may take a few seconds after boot.
umask 077
install -d -o munge -g munge -m 0700 "$ROOT/etc/munge"
KEY=$(mktemp "$ROOT/etc/munge/.munge.key.XXXXXX")
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    if aws ssm get-parameter --region "$REGION" --name "$PARAMETER" --with-decryption \
            --query Parameter.Value --output text | base64 -d > "$KEY" && [ -s "$KEY" ]; then
        break
    fi
    [ "$attempt" = 10 ] && { rm -f "$KEY"; fail "cannot read the munge key from SSM parameter $PARAMETER"; }
    sleep 3
done
chown munge:munge "$KEY"
chmod 0400 "$KEY"
mv -f "$KEY" "$ROOT/etc/munge/munge.key"
systemctl restart munge

NODE=$(SLURM_CONF_SERVER="$CONF_SERVER" scontrol show hostnames "$NODES" | sed -n "$((INDEX + 1))p")
[ -n "$NODE" ] || fail "launch index $INDEX is not in $NODES"
hostnamectl set-hostname "$NODE" 2>/dev/null || hostname "$NODE"

umask 022
printf 'SLURMD_OPTIONS="--conf-server %s -N %s"\n' "$CONF_SERVER" "$NODE" > "$ROOT/etc/default/slurmd"
systemctl enable slurmd
systemctl restart slurmd
"""


def instance_from(description: Mapping, node: str) -> Instance:
    """One DescribeInstances/RunInstances instance description as the provider interface's Instance."""
    launched = description.get("LaunchTime")
    return Instance(
        node=node,
        id=description["InstanceId"],
        state=STATES.get((description.get("State") or {}).get("Name"), names.INSTANCE_PENDING),
        address=description.get("PrivateIpAddress"),
        created=launched.timestamp() if hasattr(launched, "timestamp") else None,
    )


def map_instances(descriptions: Iterable[Mapping], cluster: str) -> dict[str, list[Instance]]:
    """node -> its instances (most alive first), from instance descriptions and their tags.

    Each hostlist tag is expanded once, however many instances carry it (a
    batch of 500 shares one). Instances of another cluster, or whose tags do
    not name a node (edited by hand), are left out.
    """
    expanded: dict[str, list[str] | None] = {}
    found: dict[str, list[Instance]] = {}
    for description in descriptions:
        tags = {tag["Key"]: tag["Value"] for tag in description.get("Tags") or ()}
        if tags.get(TAG_CLUSTER) != cluster or TAG_NODES not in tags:
            continue
        text = tags[TAG_NODES]
        if text not in expanded:
            try:
                expanded[text] = hostlist.expand(text)
            except ValueError:
                LOG.warning("ignoring instances tagged %s=%r: not a hostlist", TAG_NODES, text)
                expanded[text] = None
        names, index = expanded[text], description.get("AmiLaunchIndex", 0)
        if names is None or not 0 <= index < len(names):
            continue
        found.setdefault(names[index], []).append(instance_from(description, names[index]))
    for instances in found.values():
        instances.sort(key=lambda instance: (STATE_RANK.get(instance.state, 9), -(instance.created or 0)))
    return found


def chunks(items: Sequence, size: int) -> list:
    return [items[start : start + size] for start in range(0, len(items), size)]


def missing_instance_ids(message: str) -> set[str]:
    """The ids an InvalidInstanceID.NotFound error names ("The instance IDs 'i-1, i-2' do not exist")."""
    return set(re.findall(r"\bi-[0-9a-f]+\b", message or ""))


# -- the provider -----------------------------------------------------------------------------


class AwsProvider(Provider):
    """Elastic nodes as EC2 instances from a launch template (see the module docstring for the trust model)."""

    name = "aws"

    def __init__(self, cluster: str, options: Mapping, secrets: Secrets):
        super().__init__(cluster, options, secrets)
        opts = self.options
        refused = sorted(key for key in opts if key.lower() in CREDENTIAL_OPTIONS)
        if refused:
            raise ValueError(
                "aws provider: %s must not be in the node set's options: give the controller an instance profile, "
                "or put AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in an EnvironmentFile readable by root only" % ", ".join(refused)
            )
        for required in ("launch_template", "conf_server", "munge_key_parameter"):
            if not opts.get(required):
                raise ValueError("aws provider: set '%s' in the node set's provider options" % required)
        self.region = opts.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not self.region:
            raise ValueError("aws provider: set 'region' in the node set's provider options (the nodes fetch the munge key there too)")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+(:\d+)?(,[A-Za-z0-9_.-]+(:\d+)?)*", opts["conf_server"]):
            raise ValueError("aws provider: conf_server must be host[:port][,host2[:port]] (slurmd --conf-server), not %r" % opts["conf_server"])
        self.max_batch = int(opts.get("max_batch", DEFAULT_MAX_BATCH))
        if not 1 <= self.max_batch <= 1000:
            raise ValueError("aws provider: max_batch must be between 1 and 1000, not %d" % self.max_batch)
        self.tags = {str(k): str(v) for k, v in (opts.get("tags") or {}).items()}
        owned = sorted(key for key in self.tags if key.startswith("hybridhpc:") or key == "Name")
        if owned:
            raise ValueError("aws provider: tags %s are set by the provider: remove them from 'tags'" % ", ".join(owned))
        self.state_dir = opts.get("state_dir") or DEFAULT_STATE_DIR
        self._session = self._ec2 = self._ssm = None
        self._published: dict | None = None
        self._unsettled: dict | None = None

    # -- clients ---------------------------------------------------------------------------------

    def _client(self, service: str):
        # boto3 is imported here, not at the top: the docker and command
        # providers (and the programs slurmctld runs) must not need it.
        try:
            import boto3
            from botocore.config import Config
        except ImportError as error:
            raise ProviderError(MISSING_BOTO3) from error
        if self._session is None:
            # One session per provider: credentials (instance profile, environment) are resolved once for both clients.
            self._session = boto3.session.Session()
        endpoint = self.options.get("%s_endpoint_url" % service) or self.options.get("endpoint_url")
        # Standard retry mode: throttling and 5xx answers are retried with backoff, and a retried
        # RunInstances carries the same ClientToken, so EC2 does not launch twice.
        config = Config(retries={"mode": "standard", "max_attempts": 5}, user_agent_extra="hybridhpc-power")
        return self._session.client(service, region_name=self.region, endpoint_url=endpoint, config=config)

    @property
    def ec2(self):
        if self._ec2 is None:
            self._ec2 = self._client("ec2")
        return self._ec2

    @property
    def ssm(self):
        if self._ssm is None:
            self._ssm = self._client("ssm")
        return self._ssm

    @staticmethod
    def _errors():
        from botocore.exceptions import BotoCoreError, ClientError

        return ClientError, BotoCoreError

    # -- inventory -------------------------------------------------------------------------------

    def describe(self) -> dict[str, list[Instance]]:
        """Every live instance of this cluster, node -> instances (most alive first); ProviderError when EC2 cannot be asked."""
        client_error, botocore_error = self._errors()
        filters = [
            {"Name": "tag:" + TAG_CLUSTER, "Values": [self.cluster]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
        ]
        try:
            pages = self.ec2.get_paginator("describe_instances").paginate(Filters=filters, PaginationConfig={"PageSize": DESCRIBE_PAGE})
            descriptions = [instance for page in pages for reservation in page.get("Reservations", ()) for instance in reservation.get("Instances", ())]
        except client_error as error:
            raise ProviderError("DescribeInstances: %s" % error_code(error)) from error
        except botocore_error as error:
            raise ProviderError("DescribeInstances: %s" % error) from error
        return map_instances(descriptions, self.cluster)

    def instances(self) -> dict[str, Instance]:
        return {node: found[0] for node, found in self.describe().items()}

    # -- resume ----------------------------------------------------------------------------------

    def resume(self, nodes: Sequence[str]) -> ResumeResult:
        result = ResumeResult()
        wanted = unique_nodes(nodes)
        if not wanted:
            return result
        try:
            self.publish_munge_key()
        except ProviderError as error:
            # Nodes started now could not join: fail them all, nothing was launched.
            result.failed = dict.fromkeys(wanted, "munge key not published: %s" % error)
            return result
        existing = self.describe()
        stale = []
        to_launch = []
        for node in wanted:
            alive = [instance for instance in existing.get(node, ()) if instance.state in names.INSTANCE_ALIVE]
            if alive:
                result.started[node] = alive[0]
            else:
                to_launch.append(node)
                stale.extend(instance.id for instance in existing.get(node, ()))
        if stale:
            # Stopped by someone else (we only terminate): a new instance replaces it.
            self._terminate(stale)
        for node in [node for node in to_launch if len(node) > TAG_VALUE_MAX]:
            to_launch.remove(node)
            result.failed[node] = "node name longer than %d characters: it does not fit in an EC2 tag" % TAG_VALUE_MAX
        batches = plan_batches(to_launch, self.max_batch)
        for position, batch in enumerate(batches):
            reachable = self._launch(batch, result)
            if not reachable:
                for later in batches[position + 1 :]:
                    result.failed.update(dict.fromkeys(later, "not attempted: EC2 did not answer for an earlier batch"))
                break
        return result

    def _launch(self, batch: list[str], result: ResumeResult) -> bool:
        """One RunInstances call for a batch; records started/failed nodes. False when EC2 did not answer (outcome unknown)."""
        client_error, botocore_error = self._errors()
        text = hostlist.compress(batch)
        token = self._token(text)
        template = self.options["launch_template"]
        template_key = "LaunchTemplateId" if re.fullmatch(r"lt-[0-9a-f]{8,}", template) else "LaunchTemplateName"
        tags = [{"Key": TAG_CLUSTER, "Value": self.cluster}, {"Key": TAG_NODES, "Value": text}, {"Key": "Name", "Value": text}]
        tags += [{"Key": key, "Value": value} for key, value in sorted(self.tags.items())]
        params = {
            "LaunchTemplate": {template_key: template, "Version": str(self.options.get("launch_template_version") or "$Default")},
            "MinCount": 1,
            "MaxCount": len(batch),
            "ClientToken": token,
            # botocore base64-encodes UserData for RunInstances itself.
            "UserData": render_user_data(text, self.options["conf_server"], self.options["munge_key_parameter"], self.region),
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tags},
                {"ResourceType": "volume", "Tags": [tag for tag in tags if tag["Key"] != TAG_NODES]},
            ],
        }
        if self.options.get("instance_type"):
            params["InstanceType"] = self.options["instance_type"]
        if self.options.get("subnet_id"):
            params["SubnetId"] = self.options["subnet_id"]
        try:
            answer = self.ec2.run_instances(**params)
        except client_error as error:
            # EC2 answered: nothing was launched, and the next attempt is a new launch.
            self._settle(text)
            result.failed.update(dict.fromkeys(batch, error_code(error)))
            return True
        except botocore_error as error:
            # No answer: the instances may exist. The token is kept so a retry gets them instead of launching again.
            LOG.warning("RunInstances for %s: no answer (%s); a retry reuses its client token", text, error)
            result.failed.update(dict.fromkeys(batch, "RunInstances: no answer from EC2 (%s)" % type(error).__name__))
            return False
        self._settle(text)
        for description in answer.get("Instances", ()):
            index = description.get("AmiLaunchIndex", 0)
            if 0 <= index < len(batch):
                result.started[batch[index]] = instance_from(description, batch[index])
        launched = sum(1 for node in batch if node in result.started)
        for node in batch:
            if node not in result.started:
                result.failed[node] = "capacity: EC2 launched %d of %d instances of this batch" % (launched, len(batch))
        return True

    # -- client tokens of launches whose outcome is unknown ------------------------------------

    def _unsettled_tokens(self) -> dict:
        if self._unsettled is None:
            self._unsettled = self._read_state("aws-%s-launches.json" % safe_name(self.cluster)) or {}
        now = time.time()
        self._unsettled = {text: entry for text, entry in self._unsettled.items() if now - entry.get("since", 0) < UNSETTLED_TOKEN_TTL}
        return self._unsettled

    def _token(self, text: str) -> str:
        """The client token for launching this batch: the unsettled attempt's if there is one, else a new one (recorded first)."""
        unsettled = self._unsettled_tokens()
        if text not in unsettled:
            now = time.time()
            unsettled[text] = {"token": client_token(self.cluster, text, "%.6f" % now), "since": now}
            self._write_state("aws-%s-launches.json" % safe_name(self.cluster), unsettled)
        return unsettled[text]["token"]

    def _settle(self, text: str) -> None:
        unsettled = self._unsettled_tokens()
        if unsettled.pop(text, None) is not None:
            self._write_state("aws-%s-launches.json" % safe_name(self.cluster), unsettled)

    # -- suspend ---------------------------------------------------------------------------------

    def suspend(self, nodes: Sequence[str]) -> SuspendResult:
        result = SuspendResult()
        wanted = unique_nodes(nodes)
        if not wanted:
            return result
        existing = self.describe()
        owners = {}
        for node in wanted:
            for instance in existing.get(node, ()):
                owners[instance.id] = node
        failed_ids = self._terminate(list(owners))
        for instance_id, reason in failed_ids.items():
            result.failed[owners[instance_id]] = reason
        result.stopped = [node for node in wanted if node not in result.failed]
        return result

    def _terminate(self, ids: list[str]) -> dict[str, str]:
        """TerminateInstances in chunks of 1,000; instance id -> reason for those that could not be terminated."""
        client_error, botocore_error = self._errors()
        failed = {}
        for chunk in chunks(ids, TERMINATE_MAX):
            for attempt in (1, 2):
                try:
                    self.ec2.terminate_instances(InstanceIds=chunk)
                    break
                except client_error as error:
                    gone = missing_instance_ids(error_message(error)) if error_code(error) == "InvalidInstanceID.NotFound" else set()
                    if attempt == 1 and gone:
                        # Already gone between DescribeInstances and now: terminate the others.
                        chunk = [instance_id for instance_id in chunk if instance_id not in gone]
                        if chunk:
                            continue
                        break
                    failed.update(dict.fromkeys(chunk, error_code(error)))
                    break
                except botocore_error as error:
                    failed.update(dict.fromkeys(chunk, "TerminateInstances: no answer from EC2 (%s)" % type(error).__name__))
                    break
        return failed

    # -- the munge key in SSM --------------------------------------------------------------------

    def publish_munge_key(self, force: bool = False) -> bool:
        """Put the munge key (base64) into the SecureString parameter when it differs from what was last published.

        What was published is remembered as a sha256 (of the key, the
        parameter and where it lives) in a file in state_dir, so resumes do
        not call SSM each time. True when it wrote the parameter. A parameter
        deleted out of band is not noticed: call with force=True (the
        reconciler or an operator) to write it anyway.
        """
        client_error, botocore_error = self._errors()
        parameter = self.options["munge_key_parameter"]
        key = self.secrets.munge_key()
        where = "\0".join((self.region, self.options.get("ssm_endpoint_url") or self.options.get("endpoint_url") or "", parameter))
        digest = hashlib.sha256(where.encode() + b"\0" + key).hexdigest()
        record_file = "aws-munge-key-%s.json" % hashlib.sha256(where.encode()).hexdigest()[:16]
        if self._published is None:
            self._published = self._read_state(record_file) or {}
        if not force and self._published.get("sha256") == digest:
            return False
        value = base64.b64encode(key).decode("ascii")
        if len(value) > SSM_ADVANCED_MAX:
            raise ProviderError("the munge key is %d bytes: more than an SSM parameter holds (6 KB of key)" % len(key))
        request = {"Name": parameter, "Value": value, "Type": "SecureString", "Overwrite": True}
        if len(value) > SSM_STANDARD_MAX:
            request["Tier"] = "Advanced"
        if self.options.get("munge_key_kms_key_id"):
            request["KeyId"] = self.options["munge_key_kms_key_id"]
        try:
            self.ssm.put_parameter(**request)
        except client_error as error:
            raise ProviderError("PutParameter %s: %s" % (parameter, error_code(error))) from error
        except botocore_error as error:
            raise ProviderError("PutParameter %s: %s" % (parameter, type(error).__name__)) from error
        self._published = {"parameter": parameter, "sha256": digest, "published": time.time()}
        self._write_state(record_file, self._published)
        return True

    # -- small state files -----------------------------------------------------------------------

    def _read_state(self, name: str) -> dict | None:
        try:
            with open(os.path.join(self.state_dir, name), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _write_state(self, name: str, data: dict) -> None:
        """Atomically, mode 0600 (a sha256 of the key is no secret, but nobody else needs it).

        A file that cannot be written (``hybridhpc-power check`` run by a user)
        costs API calls later, never a failed resume: the data stays in memory.
        """
        path = os.path.join(self.state_dir, name)
        try:
            os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
            write_atomically(path, json.dumps(data), 0o600, ".%s-" % name)
        except OSError as error:
            LOG.warning("cannot write %s (%s): kept in memory for this run only", path, error)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def error_code(error) -> str:
    """The AWS error code of a botocore ClientError ("InsufficientInstanceCapacity")."""
    return (getattr(error, "response", None) or {}).get("Error", {}).get("Code") or type(error).__name__


def error_message(error) -> str:
    return (getattr(error, "response", None) or {}).get("Error", {}).get("Message") or ""
