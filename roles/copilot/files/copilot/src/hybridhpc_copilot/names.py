"""Every well-known name the copilot reads or writes, in one place.

Kubernetes side: the GenericNode custom resource (ACK's group and kind, so the
copilot can run beside ACK's own controllers), its labels, the ledger fields
in its status, the annotation and finalizer the copilot owns. Slurm side: the
count-only GRES names and the drain-reason prefix that marks drains the
copilot set (it never clears any other).
"""

from typing import Final

# -- the GenericNode custom resource ----------------------------------------
GROUP = "kai.alibabacloud.com"
VERSION = "v1alpha1"
PLURAL = "genericnodes"
KIND = "GenericNode"
API_VERSION = GROUP + "/" + VERSION
CRD_NAME = PLURAL + "." + GROUP

LABEL_CLUSTER_NAME = "kai.alibabacloud.com/cluster-name"
LABEL_CLUSTER_NAMESPACE = "kai.alibabacloud.com/cluster-namespace"
NODE_TYPE_SLURM = "Slurm"

# -- ledger fields (GenericNode .spec / .status) -----------------------------
SPEC_ALIAS = "alias"
SPEC_TYPE = "type"
SPEC_ADMISSIONS = "admissions"
# Final: literal types, so that they index the typed status (ledger.Status).
STATUS_ADMISSIONS: Final = "admissions"
STATUS_ALLOCATED: Final = "allocatedResources"
STATUS_SLURM: Final = "slurm"
STATUS_CONDITIONS: Final = "conditions"

ALLOCATION_SLURM = "Slurm"
ALLOCATION_KUBERNETES = "Kubernetes"

# Admission states, in the order an admission goes through them.
RESERVED = "Reserved"  # counted and the Slurm GRES is being lowered; not yet usable
GRANTED = "Granted"  # Slurm gave the resources up: the pod may run
DENIED = "Denied"  # final: the scheduler must place the pod elsewhere (or ask again with a new uid)
RELEASED = "Released"  # the pod went away; the resources went back to Slurm
HOLDING_STATES = frozenset((RESERVED, GRANTED))
ADMISSION_STATES = (RESERVED, GRANTED, DENIED, RELEASED)

CONDITION_OVERCOMMITTED = "Overcommitted"
# True while Slurm lists no node named by spec.alias (deleted, renamed, a typo); set to False once it is
# back, and never added to a GenericNode whose Slurm node was always there.
CONDITION_SLURM_NODE_MISSING = "SlurmNodeMissing"

# -- names the copilot owns ----------------------------------------------------
FINALIZER = "hybridhpc.io/copilot"
ANNOTATION_SLURM_DRAIN_REASON = "hybridhpc.io/slurm-drain-reason"
DRAIN_REASON_PREFIX = "copilot:"
FIELD_MANAGER = "hybridhpc-copilot"

# -- Slurm ----------------------------------------------------------------------
GRES_CPU = "k8scpu"  # count-only GRES: CPUs
GRES_MEMORY = "k8smemory"  # count-only GRES: MB (Slurm's MB are MiB)

# The placeholder strategy's jobs: this prefix, then "<GenericNode>/<admission uid>".
PLACEHOLDER_JOB_PREFIX = "copilot-placeholder/"

# slurmctld refuses a slurmd registration when a GRES count differs from the one
# slurmd last registered with while jobs hold that GRES (gres.c, _node_config_validate),
# and marks the node INVALID_REG + DRAIN with this reason. A count the copilot changed
# while jobs ran is such a difference; the copilot recovers from it (core.drain_sync).
REGISTRATION_REASON = r"gres/(%s|%s) count changed and jobs are using them \((\d+) != (\d+)\)" % (GRES_CPU, GRES_MEMORY)

# -- where ACK keeps a cluster's slurmrestd token ---------------------------
JWT_SECRET_NAMESPACE = "ack-slurm-operator"
JWT_SECRET_NAME = "ack-slurm-jwt-token"

# -- metrics ---------------------------------------------------------------------
METRICS_PREFIX = "hybridhpc_copilot_"
