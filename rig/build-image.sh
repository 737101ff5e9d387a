#!/usr/bin/env bash
# Build the rig's target image: Debian bookworm with systemd as PID 1, built locally with mmdebstrap
# because no container registry is reachable here. Usage: build-image.sh IMAGE_TAG RIG_HASH
set -euo pipefail
image="$1"
rig_hash="$2"
mirror="${GAUNTLET_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What a managed host has before we touch it: systemd, Python for Ansible modules, venv to
# build vLLM's virtualenv, packaging for ansible.builtin.pip, libnuma (vLLM's CPU kernels link it).
packages=systemd,systemd-sysv,dbus,python3,python3-venv,python3-apt,python3-packaging,sudo,iproute2,procps,ca-certificates,curl,libnuma1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mmdebstrap --quiet --variant=minbase --include="$packages" \
  --customize-hook='chroot "$1" systemctl mask systemd-firstboot.service getty@tty1.service console-getty.service systemd-logind.service >/dev/null 2>&1 || true' \
  --customize-hook='rm -f "$1"/etc/machine-id "$1"/var/lib/dbus/machine-id; : > "$1"/etc/machine-id' \
  bookworm "$work/rootfs.tar" "$mirror"
podman import --quiet \
  --change 'CMD ["/sbin/init"]' \
  --change 'ENV container=podman' \
  --change "LABEL gauntlet.rig.hash=$rig_hash" \
  --change 'STOPSIGNAL SIGRTMIN+3' \
  "$work/rootfs.tar" "$image" >/dev/null
