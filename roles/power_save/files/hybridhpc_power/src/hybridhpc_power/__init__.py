"""hybridhpc-power: Slurm power saving for elastic (State=CLOUD) nodes.

slurmctld calls ResumeProgram / SuspendProgram / ResumeFailProgram with a
hostlist; those only queue a request and return at once (a program that waits
on a cloud API holds Slurm's script daemon). A root worker, started by a
systemd path unit when the queue is not empty, hands the requests to the node
set's provider (docker, aws, command); a timer runs the reconciler, which
repairs nodes stuck between states.
"""

__version__ = "0.1.0"
