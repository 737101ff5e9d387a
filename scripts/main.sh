#!/usr/bin/env bash
# README command 1: set up the rig, then bring up the embedded default, a GPU-less host (a podman
# container booting systemd) serving the tiny model with vLLM, and show one completion from it.
# Re-running changes nothing and finishes fast. Extra arguments go to ansible-playbook.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$GAUNTLET_ROOT/scripts/rig.sh"

step "deploy the embedded default (playbooks/main.yml)"
cd "$GAUNTLET_ROOT"
ansible-playbook -i inventory/embedded/hosts.yml playbooks/main.yml "$@"
step_done
