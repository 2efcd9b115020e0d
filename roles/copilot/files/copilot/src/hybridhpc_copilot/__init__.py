"""hybridhpc-copilot: Kubernetes pods and Slurm jobs on the same nodes, without double allocation."""

__version__ = "0.1.0"
