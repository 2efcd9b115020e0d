#!/bin/sh
# Lab-only: the packages the collection installs on a compute node of the
# default suite, installed the way a cold converge does with apt and the way an
# image builder would: Apptainer's fallback suite (sid) as the apptainer role
# writes it (filter slurm_host_apt_sources), the index refreshed, one
# transaction with service starts held back (policy-rc.d 101, as
# slurm_common's install). Two users: the compute image's Dockerfile, and
# tests/bench/bench_converge.py, which runs it in a fresh lab container to
# measure what apt alone costs a node (its CPU: the floor of a cold converge
# per added node with apt). It leaves the sid source, the pin and the policy
# in place: the caller removes what it must not keep.
set -eu
printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: sid\nComponents: main\nLanguages: none\nCheck-Valid-Until: no\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  > /etc/apt/sources.list.d/image-sid.sources
printf 'Package: *\nPin: release n=sid\nPin-Priority: 100\n\nPackage: apptainer\nPin: release n=sid\nPin-Priority: 990\n' \
  > /etc/apt/preferences.d/image-apptainer
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  apptainer fuse2fs fuse3 munge slurm-client slurmd squashfs-tools squashfuse >/dev/null
