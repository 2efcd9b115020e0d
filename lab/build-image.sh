#!/usr/bin/env bash
# Build the lab image (Debian trixie + systemd) from Debian packages, cached by tag.
# The tag hashes the inputs, so an edit to the Dockerfile rebuilds and an
# unchanged tree reuses the image. Lab-only: nothing here ships in the collection.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mirror="${HYBRIDHPC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# v2: openssh-server, so the lab can be reached over SSH like production hosts.
rootfs_tag="hybridhpc/debian-trixie-rootfs:v2"
inputs_hash="$(cat "$here/image/Dockerfile" "$here/image/debian.sources" "$here/image/lab-ssh-hostkeys.service" "$here/image/node/Dockerfile" "$0" | sha256sum | cut -c1-12)"
image="hybridhpc/slurm-lab:trixie-${inputs_hash}"

if docker image inspect "$image" >/dev/null 2>&1 && docker image inspect "${image/slurm-lab:/slurm-lab-node:}" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

if ! docker image inspect "$rootfs_tag" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "lab: debootstrap missing (apt-get install debootstrap)" >&2; exit 1; }
  work="$(mktemp -d /var/tmp/hybridhpc-rootfs.XXXXXX)"
  trap 'rm -rf "$work"' EXIT
  echo "lab: debootstrap trixie into $work (about a minute)" >&2
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,iproute2,procps,ca-certificates,gnupg,openssh-server \
    trixie "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; echo "lab: debootstrap failed" >&2; exit 1; }
  chroot "$work/rootfs" apt-get clean
  rm -rf "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -c . | docker import - "$rootfs_tag" >/dev/null
fi

node_image="hybridhpc/slurm-lab-node:trixie-${inputs_hash}"
if ! docker image inspect "$image" >/dev/null 2>&1; then
  echo "lab: building $image" >&2
  docker build -q --build-arg "BASE=$rootfs_tag" -t "$image" "$here/image" >/dev/null
fi
# The elastic nodes' image (lab/image/node): named like the lab image, so
# whoever knows one knows the other (inventories/lab derives it).
if ! docker image inspect "$node_image" >/dev/null 2>&1; then
  echo "lab: building $node_image (MUNGE and slurmd for elastic nodes, about a minute)" >&2
  docker build -q --build-arg "BASE=$image" -t "$node_image" "$here/image/node" >/dev/null
fi
echo "$image"
