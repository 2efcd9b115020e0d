# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""hybridhpc-health: Slurm's HealthCheckProgram for a compute node.

slurmd runs it as root every HealthCheckInterval seconds and at start. Each
configured check runs in its own child process with a time limit (a stat()
on a dead NFS mount cannot hold the run); any failure drains the node with a
``healthcheck: ...`` reason, and a node drained by this program is resumed
once every check passes again. Standard library only.
"""

__version__ = "0.1.0"
