#!/usr/bin/env bash
# Build the rig's vLLM image: the target image plus the vLLM venv, installed by the real vllm_install
# role (rig/bake-vllm-image.yml) over the containers.podman.podman connection into a container of
# the base image, with the wheelhouse mounted as on every target, then committed once systemd has
# shut the container down. Scenarios not about installing start from it; their vllm_install run
# then verifies the venv and changes nothing.
# Usage: bake-vllm-image.sh BASE_IMAGE VLLM_IMAGE STEP_HASH
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../scripts/lib.sh"
base="$1"
image="$2"
step_hash="$3"
name=gauntlet-bake-vllm
work="$(mktemp -d)"
cleanup() {
  podman rm -f --time 0 "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

podman rm -f --time 0 "$name" >/dev/null 2>&1 || true
previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
podman run -d --name "$name" --hostname "$name" --systemd=always --shm-size=2g \
  -v "$GAUNTLET_WHEELHOUSE:$GAUNTLET_TARGET_WHEELHOUSE:ro" "$base" /sbin/init >/dev/null

# The embedded default's group_vars (connection, vllm_install_* settings) beside a one-host inventory.
ln -s "$GAUNTLET_ROOT/inventory/embedded/group_vars" "$work/group_vars"
printf 'all:\n  children:\n    vllm_hosts:\n      hosts:\n        %s:\n' "$name" >"$work/hosts.yml"
ansible-playbook -i "$work/hosts.yml" "$GAUNTLET_ROOT/rig/bake-vllm-image.yml" >"$work/bake.log" 2>&1 \
  || { tail -n 40 "$work/bake.log" >&2; exit 1; }

# uv's wheel cache and Ansible's temp files are no part of the install (a repair reinstalls from the
# package sources with --no-cache, never from uv's cache).
podman exec "$name" rm -rf /root/.cache /root/.ansible
# The image's STOPSIGNAL (SIGRTMIN+3) asks systemd to shut down; commit only a cleanly stopped container.
podman stop --time 120 "$name" >/dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[[ "$code" == 0 ]] || die "$name did not shut down cleanly (exit code $code)"
# systemd wrote the container's machine id at boot; the image keeps the base's empty one, so each
# container gets its own.
install -m 0644 /dev/null "$work/machine-id"
podman cp "$work/machine-id" "$name:/etc/machine-id"
podman commit --quiet --change 'CMD ["/sbin/init"]' --change 'ENV container=podman' --change 'STOPSIGNAL SIGRTMIN+3' \
  "$name" "$image-bake" >/dev/null
# podman commit keeps the container's run-time HOSTNAME and TERM in the image's environment, where
# they would override every later container's own; a config-only build drops them and adds the
# step's key last, so only a finished bake carries it.
printf 'FROM %s\nLABEL gauntlet.rig.vllm-hash=%s\n' "$image-bake" "$step_hash" \
  | podman build --quiet --unsetenv HOSTNAME --unsetenv TERM --tag "$image" --file - "$work" >/dev/null
podman rmi "$image-bake" >/dev/null
# The image this one replaces, unless a container still uses it.
[[ -z "$previous" || "$previous" == "$(podman image inspect --format '{{.Id}}' "$image")" ]] \
  || podman rmi "$previous" >/dev/null 2>&1 || true
