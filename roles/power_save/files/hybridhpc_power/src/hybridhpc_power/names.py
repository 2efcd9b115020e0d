"""Every well-known name hybridhpc-power reads or writes, in one place."""

# -- the request actions (the programs slurmctld runs, and the worker's work) --
RESUME = "resume"  # ResumeProgram: start machines for these nodes
SUSPEND = "suspend"  # SuspendProgram: remove their machines
RESUME_FAIL = "resume-fail"  # ResumeFailProgram: Slurm gave up waiting (ResumeTimeout)
ACTIONS = (RESUME, SUSPEND, RESUME_FAIL)

# -- Slurm -------------------------------------------------------------------
# Every DOWN reason this tool sets starts with this prefix; the reconciler
# only ever returns to service nodes whose reason starts with it (a DOWN or
# DRAIN someone else set is never touched).
REASON_PREFIX = "hybridhpc-power:"
REASON_INSTANCE_GONE = REASON_PREFIX + " instance gone"
REASON_RESUME_FAILED = REASON_PREFIX + " resume failed: "
REASON_RESUME_TIMEOUT = REASON_PREFIX + " resume timed out (ResumeTimeout reached)"
# What slurmctld 24.11 writes (or appends with " : ") when ResumeTimeout expires.
SLURM_RESUME_TIMEOUT_REASON = "ResumeTimeout reached"

# Node state flags as `scontrol --json show nodes` (data_parser v0.0.42) spells them.
STATE_DOWN = "DOWN"
STATE_DRAIN = "DRAIN"
STATE_CLOUD = "CLOUD"
STATE_POWERED_DOWN = "POWERED_DOWN"  # idle~ / down~
STATE_POWERING_UP = "POWERING_UP"  # idle# / alloc# / down#
STATE_POWERING_DOWN = "POWERING_DOWN"  # idle% / down%
STATE_POWER_DOWN = "POWER_DOWN"  # idle! / down!: power down requested, not started yet
STATE_NOT_RESPONDING = "NOT_RESPONDING"

# -- machines ------------------------------------------------------------------
# Labels (docker) / tags (aws) on every machine this tool starts: how
# instances() finds them again; the cluster label also keeps two clusters
# sharing one docker daemon or cloud account apart.
LABEL_CLUSTER = "hybridhpc.slurm.cluster"
LABEL_NODE = "hybridhpc.slurm.node"

# Instance.state values (providers map their own words to these).
INSTANCE_PENDING = "pending"
INSTANCE_RUNNING = "running"
INSTANCE_STOPPING = "stopping"
INSTANCE_STOPPED = "stopped"
INSTANCE_TERMINATED = "terminated"
# A machine in one of these states can still become (or is) the node.
INSTANCE_ALIVE = frozenset((INSTANCE_PENDING, INSTANCE_RUNNING))

# -- files ---------------------------------------------------------------------
REQUEST_SUFFIX = ".json"
TMP_PREFIX = ".tmp-"  # requests being written; the worker skips (and eventually removes) them
DEFAULT_CONFIG = "/etc/hybridhpc/power.json"
