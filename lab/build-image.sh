#!/usr/bin/env bash
# Build the lab image (Debian + systemd) from Debian packages, cached by tag.
# HYBRIDHPC_LAB_SUITE picks the Debian suite, and with it the Slurm major:
# bookworm (22.05), trixie (24.11, the default), sid (26.05). The tag names the
# suite and hashes the inputs, so an edit to the Dockerfile rebuilds and an
# unchanged tree reuses the image:
#   hybridhpc/slurm-lab:<suite>-<hash>        (and hybridhpc/slurm-lab-node:<suite>-<hash>)
#   hybridhpc/debian-<suite>-rootfs:v2        (the debootstrap, built once)
# Prints the lab image's tag. Lab-only: nothing here ships in the collection.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mirror="${HYBRIDHPC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite="${HYBRIDHPC_LAB_SUITE:-trixie}"
# systemd 256 and later (sid) refuse to boot on cgroup v1 (labctl adapts).
cgroup_v1=yes
case "$suite" in
  bookworm|trixie) ;;
  sid) cgroup_v1=no ;;
  *) echo "lab: HYBRIDHPC_LAB_SUITE=$suite is not a lab suite (bookworm, trixie or sid)" >&2; exit 2 ;;
esac
sources="$here/image/debian-${suite}.sources"
# v2: openssh-server, so the lab can be reached over SSH like production hosts.
rootfs_tag="hybridhpc/debian-${suite}-rootfs:v2"
inputs_hash="$( (echo "$suite"; cat "$here/image/Dockerfile" "$sources" "$here/image/lab-ssh-hostkeys.service" "$here/image/node/Dockerfile" "$0") | sha256sum | cut -c1-12)"
image="hybridhpc/slurm-lab:${suite}-${inputs_hash}"
node_image="hybridhpc/slurm-lab-node:${suite}-${inputs_hash}"

if docker image inspect "$image" >/dev/null 2>&1 && docker image inspect "$node_image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

if ! docker image inspect "$rootfs_tag" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "lab: debootstrap missing (apt-get install debootstrap)" >&2; exit 1; }
  work="$(mktemp -d /var/tmp/hybridhpc-rootfs.XXXXXX)"
  trap 'rm -rf "$work"' EXIT
  echo "lab: debootstrap $suite into $work (about a minute)" >&2
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,iproute2,procps,ca-certificates,gnupg,openssh-server \
    "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; echo "lab: debootstrap failed" >&2; exit 1; }
  chroot "$work/rootfs" apt-get clean
  rm -rf "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -c . | docker import - "$rootfs_tag" >/dev/null
fi

if ! docker image inspect "$image" >/dev/null 2>&1; then
  echo "lab: building $image" >&2
  docker build -q --build-arg "BASE=$rootfs_tag" --build-arg "SUITE=$suite" --build-arg "CGROUP_V1=$cgroup_v1" -t "$image" "$here/image" >/dev/null
fi
# The elastic nodes' image (lab/image/node): named like the lab image, so
# whoever knows one knows the other (inventories/lab derives it).
if ! docker image inspect "$node_image" >/dev/null 2>&1; then
  echo "lab: building $node_image (MUNGE and slurmd for elastic nodes, about a minute)" >&2
  docker build -q --build-arg "BASE=$image" -t "$node_image" "$here/image/node" >/dev/null
fi
echo "$image"
