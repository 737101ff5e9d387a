# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_service role's preflight and unit template, run by ansible-playbook on localhost (one
run, one block per case): where it listens, what it refuses before anything is written, where
each secret lands, and the unit's hardening, checked with systemd-analyze verify. Nothing here
starts a server; the molecule scenario vllm_service does that."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

import pytest
import yaml
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import run_playbook

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEMPLATES = os.path.join(ROOT, "roles", "vllm_service", "templates")
WATCHDOG = os.path.join(ROOT, "roles", "vllm_watchdog")


def _watchdog_vars():
    """The variables vllm_watchdog's templates see when vllm_service calls it: its defaults and vars, under the
    vars: vllm_service passes (read from tasks/watchdog.yml, so this test renders what the role would)."""
    merged = {}
    for path in (os.path.join(WATCHDOG, "defaults", "main.yml"), os.path.join(WATCHDOG, "vars", "main.yml")):
        with open(path) as handle:
            merged.update(yaml.safe_load(handle))
    with open(os.path.join(ROOT, "roles", "vllm_service", "tasks", "watchdog.yml")) as handle:
        include = yaml.safe_load(handle)[0]
    assert include["ansible.builtin.include_role"]["name"] == "gauntlet.vllm.vllm_watchdog"
    merged.update(include["vars"])
    return merged


API_KEY = "gauntlet-role-api-key-5e2b7c90"
SECRET = "gauntlet-db-secret-3a91f4c2"
REFUSED_KEY = "gauntlet-refused-key-c0ffee42"
OLD_SECRET = "gauntlet-old-secret-9d8c7b6a"

# A plan over two nodes with Ray as vllm_plan gives it (executor_backend ray): vLLM on the head alone.
RAY_PLAN = {"name": "DP2@2nodes", "valid": True, "nodes": 2, "vllm_args": ["--data-parallel-size", "2"],
            "launch": {"mode": "ray", "nodes": [
                {"node_rank": 0, "role": "head", "runs": "vllm serve",
                 "args": ["--distributed-executor-backend", "ray", "--data-parallel-backend", "ray"]},
                {"node_rank": 1, "role": "worker", "runs": "ray worker", "args": []}]}}
RAY_NODE = {"vllm_service_plan": RAY_PLAN, "vllm_service_head_address": "10.0.0.10",
            "vllm_service_ray_address": "10.0.0.10:6379"}

# name -> the case's variables
CASES = {
    "loopback_default": {},
    "key_listens_everywhere": {"vllm_service_api_key": API_KEY},
    "key_from_the_secret_map": {"vllm_service_secret_env": {"VLLM_API_KEY": API_KEY}},
    "open_without_key": {"vllm_service_host": "0.0.0.0"},
    "open_allowed": {"vllm_service_host": "0.0.0.0", "vllm_service_allow_unauthenticated": True},
    "api_key_in_extra_args": {"vllm_service_api_key": API_KEY,
                              "vllm_service_serving": {"extra_args": ["--enforce-eager", "--api-key", REFUSED_KEY]}},
    "api_key_equals_in_extra_args": {"vllm_service_serving": {"extra_args": ["--api-key=" + REFUSED_KEY]}},
    "host_in_extra_args": {"vllm_service_serving": {"extra_args": ["--host", "0.0.0.0"]}},
    "secret_name_in_serving_env": {"vllm_service_serving": {"env": {"WANDB_API_KEY": REFUSED_KEY}}},
    "secret_name_in_plain_env": {"vllm_service_environment": {"WANDB_API_KEY": REFUSED_KEY}},
    "secret_value_in_plain_env": {"vllm_service_secret_env": {"GAUNTLET_DB_CONN": SECRET},
                                  "vllm_service_environment": {"DB_URL": "postgres://app@db/" + SECRET}},
    "secret_env": {"vllm_service_api_key": API_KEY, "vllm_service_hf_token": "hf_" + "x" * 34,
                   "vllm_service_secret_env": {"GAUNTLET_DB_CONN": SECRET}},
    "deprecated_secret_environment": {"vllm_service_secret_environment": {"GAUNTLET_OLD": OLD_SECRET}},
    "recipe_flags": {"vllm_service_serving": {"tool_call_parser": "hermes", "enable_auto_tool_choice": True,
                                              "reasoning_parser": "qwen3", "max_num_seqs": 64,
                                              "speculative": {"method": "mtp", "num_speculative_tokens": 1},
                                              "env": {"VLLM_USE_DEEP_GEMM": "1"}, "chat_template": None},
                     "vllm_service_environment": {"OMP_NUM_THREADS": "1"}},
    "tool_parser_without_auto_choice": {"vllm_service_serving": {"tool_call_parser": "hermes"}},
    "root_user": {"vllm_service_user": "root", "vllm_service_read_write_paths": ["-/srv/vllm-scratch"],
                  "vllm_service_environment": {"TRITON_CACHE_DIR": "/scratch/triton"}},
    # vLLM's sleep mode opens development endpoints that take no key: loopback, or the network's word for it.
    "sleep_mode_loopback": {"vllm_service_serving": {"sleep_mode": True}},
    "sleep_mode_on_the_network": {"vllm_service_api_key": API_KEY, "vllm_service_serving": {"sleep_mode": True}},
    "sleep_mode_network_trusted": {"vllm_service_api_key": API_KEY, "vllm_service_serving": {"sleep_mode": True},
                                   "vllm_service_dev_endpoints_reachable": True},
    "ray_head": dict(RAY_NODE, vllm_service_node_rank=0, vllm_service_node_address="10.0.0.10"),
    "ray_worker_refused": dict(RAY_NODE, vllm_service_node_rank=1, vllm_service_node_address="10.0.0.11"),
    "ray_without_address": dict(RAY_NODE, vllm_service_node_rank=0, vllm_service_node_address="10.0.0.10",
                                vllm_service_ray_address=""),
}

CASE_TASKS = """
    - name: Case {name}
      vars: {variables}
      block:
        - name: Run the role's preflight
          ansible.builtin.include_role:
            name: gauntlet.vllm.vllm_service
            tasks_from: preflight.yml
            public: true
        - name: Build the command line (vllm_args_check builds only, the venv here is a stub)
          ansible.builtin.include_role:
            name: gauntlet.vllm.vllm_service
            tasks_from: args.yml
            public: true
        - name: Render the unit
          ansible.builtin.template:
            src: {templates}/vllm.service.j2
            dest: {out}/{name}.service
            mode: "0644"
        - name: Render the environment file
          ansible.builtin.template:
            src: {templates}/vllm.env.j2
            dest: {out}/{name}.env
            mode: "0600"
          no_log: true
        - name: Render the watchdog's service and timer (vllm_watchdog's, with the vars vllm_service passes)
          vars: {watchdog_vars}
          ansible.builtin.template:
            src: {watchdog}/templates/vllm-watchdog.{{{{ item }}}}.j2
            dest: {out}/{name}-watchdog.{{{{ item }}}}
            mode: "0644"
          loop: [service, timer]
        - name: Keep the outcome
          ansible.builtin.copy:
            content: "{{{{ {{'ok': true, 'args': __vllm_service_args, 'host': __vllm_service_host | default(none)}} | to_json }}}}"
            dest: {out}/{name}.json
            mode: "0644"
      rescue:
        - name: Keep the refusal
          ansible.builtin.copy:
            content: "{{{{ {{'ok': false, 'msg': ansible_failed_result.msg}} | to_json }}}}"
            dest: {out}/{name}.json
            mode: "0644"
"""


def _stub(path):
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\nexit 0\n")
    os.chmod(path, 0o755)


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """Run every case in one ansible-playbook (-v, as molecule logs it); return (outcomes, files dir, stdout)."""
    base = tmp_path_factory.mktemp("vllm_service_role")
    out, model, venv = base / "out", base / "model", base / "venv" / "bin"
    for directory in (out, model, venv):
        directory.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    _stub(str(venv / "vllm"))
    _stub(str(venv / "python"))
    header = {"vllm_service_name": "tiny", "vllm_service_model": str(model), "vllm_service_venv": str(venv.parent),
              "vllm_service_port": 8000, "vllm_service_args_check": False}
    playbook = "- hosts: localhost\n  connection: local\n  gather_facts: false\n  vars: %s\n  tasks:\n" % json.dumps(header)
    for name, variables in CASES.items():
        playbook += CASE_TASKS.format(name=name, variables=json.dumps(variables), templates=TEMPLATES, out=out,
                                      watchdog=WATCHDOG, watchdog_vars=json.dumps(_watchdog_vars()))
    (base / "play.yml").write_text(playbook)
    result = run_playbook(["-v", base / "play.yml"])
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    outcomes = {}
    for name in CASES:
        path = out / ("%s.json" % name)
        assert path.exists(), "case %s left no outcome:\n%s" % (name, result.stdout[-4000:])
        outcomes[name] = json.loads(path.read_text())
    return outcomes, out, result.stdout + result.stderr


def _host(outcome):
    args = outcome["args"]
    return args[args.index("--host") + 1]


def test_without_a_key_the_server_listens_on_loopback_only(played):
    outcomes, out, dummy = played
    assert outcomes["loopback_default"]["ok"] is True
    assert _host(outcomes["loopback_default"]) == "127.0.0.1"
    assert '"--host" "127.0.0.1"' in (out / "loopback_default.service").read_text()


@pytest.mark.parametrize("case", ["key_listens_everywhere", "key_from_the_secret_map", "open_allowed"])
def test_with_a_key_or_the_allowance_it_listens_everywhere(played, case):
    outcome = played[0][case]
    assert outcome["ok"] is True, outcome
    assert _host(outcome) == "0.0.0.0"


def test_an_open_address_without_a_key_is_refused_naming_both_variables(played):
    outcome = played[0]["open_without_key"]
    assert outcome["ok"] is False
    assert "vllm_service_api_key" in outcome["msg"] and "vllm_service_allow_unauthenticated" in outcome["msg"]
    assert not (played[1] / "open_without_key.service").exists()


@pytest.mark.parametrize("case, words", [
    ("api_key_in_extra_args", ["--api-key", "vllm_service_api_key"]),
    ("api_key_equals_in_extra_args", ["--api-key", "vllm_service_api_key"]),
    ("host_in_extra_args", ["--host", "vllm_service_host"]),
    ("secret_name_in_plain_env", ["WANDB_API_KEY", "vllm_service_secret_env"]),
    ("secret_value_in_plain_env", ["vllm_service_environment holds the value of the secret GAUNTLET_DB_CONN"]),
    ("secret_name_in_serving_env", ["vllm_service_serving.env: WANDB_API_KEY", "vllm_service_secret_env"]),
])
def test_secrets_outside_the_environment_file_are_refused_before_anything_is_written(played, case, words):
    outcomes, out, stdout = played
    assert outcomes[case]["ok"] is False
    for word in words:
        assert word in outcomes[case]["msg"]
    assert not (out / ("%s.service" % case)).exists()
    assert REFUSED_KEY not in outcomes[case]["msg"] and SECRET not in outcomes[case]["msg"]


def test_secrets_reach_only_the_environment_file(played):
    outcomes, out, dummy = played
    unit = (out / "secret_env.service").read_text()
    env = (out / "secret_env.env").read_text()
    for secret in (API_KEY, SECRET, "hf_" + "x" * 34):
        assert secret not in unit
        assert secret not in json.dumps(outcomes["secret_env"])
    assert 'GAUNTLET_DB_CONN="%s"' % SECRET in env
    assert 'VLLM_API_KEY="%s"' % API_KEY in env
    assert "EnvironmentFile=" in unit
    assert oct(os.stat(str(out / "secret_env.env")).st_mode & 0o777) == "0o600"


def test_the_old_secret_map_name_still_works(played):
    outcomes, out, stdout = played
    assert 'GAUNTLET_OLD="%s"' % OLD_SECRET in (out / "deprecated_secret_environment.env").read_text()
    assert OLD_SECRET not in (out / "deprecated_secret_environment.service").read_text()
    assert "vllm_service_secret_environment is deprecated" in stdout


def test_no_secret_reaches_the_playbook_output(played):
    stdout = played[2]
    for secret in (API_KEY, SECRET, REFUSED_KEY, OLD_SECRET, "hf_" + "x" * 34):
        assert secret not in stdout


def _directives(text):
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_the_unit_is_hardened_and_keeps_the_gpus_usable(played):
    directives = _directives((played[1] / "loopback_default.service").read_text())
    for directive in ("UMask=0027", "NoNewPrivileges=yes", "CapabilityBoundingSet=", "AmbientCapabilities=",
                      "ProtectSystem=strict", 'ReadWritePaths="/var/lib/vllm"', "PrivateTmp=yes",
                      "ProtectKernelTunables=yes", "ProtectControlGroups=yes", "LockPersonality=yes",
                      "RestrictRealtime=yes", "SystemCallArchitectures=native",
                      "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK"):
        assert directive in directives
    # Each of these closes /dev/nvidia* (ProtectClock=yes through an implied DeviceAllow= before systemd 252).
    for closing in ("PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "ProcSubset"):
        assert not any(line.startswith(closing + "=") for line in directives)


def test_a_root_server_keeps_its_capabilities_and_gets_the_writable_paths_asked_for(played):
    directives = _directives((played[1] / "root_user.service").read_text())
    assert not any(line.startswith(("User=", "CapabilityBoundingSet=")) for line in directives)
    assert 'ReadWritePaths="-/srv/vllm-scratch"' in directives
    assert 'ReadWritePaths="-/scratch/triton"' in directives
    assert "ProtectSystem=strict" in directives


@pytest.mark.parametrize("case", ["loopback_default", "secret_env", "root_user", "ray_head"])
def test_systemd_accepts_the_unit(played, case):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed (systemd package)"
    directory = played[1] / ("verify-" + case)
    directory.mkdir()
    shutil.copy(str(played[1] / ("%s.service" % case)), str(directory / "vllm-tiny.service"))
    result = subprocess.run([analyze, "verify", "--man=no", str(directory / "vllm-tiny.service")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Unknown key" not in result.stderr and "Failed to parse" not in result.stderr, result.stderr


def test_recipe_flags_reach_the_command_line_as_structured_flags(played):
    outcomes = played[0]
    args = outcomes["recipe_flags"]["args"]
    assert args[args.index("--tool-call-parser") + 1] == "hermes"
    assert args[args.index("--reasoning-parser") + 1] == "qwen3"
    assert args[args.index("--max-num-seqs") + 1] == "64"
    assert "--enable-auto-tool-choice" in args
    assert json.loads(args[args.index("--speculative-config") + 1]) == {"method": "mtp", "num_speculative_tokens": 1}
    # The extra args stay last: a recipe flag never goes through them.
    assert args[-1] == "--enforce-eager" or "--enforce-eager" not in args
    # A field given as null keeps its default (no --chat-template); the recipe's env joins the unit's environment,
    # under vllm_service_environment.
    assert "--chat-template" not in args
    unit = (played[1] / "recipe_flags.service").read_text()
    assert '"VLLM_USE_DEEP_GEMM=1"' in unit and '"OMP_NUM_THREADS=1"' in unit


def test_readiness_checks_what_the_recipe_promises(played):
    out = played[1]
    unit = (out / "recipe_flags.service").read_text()
    probe = [line for line in unit.splitlines() if "--main-pid" in line][0]
    assert '"--tool-check"' in probe and '"--reasoning-check"' in probe
    # A tool parser without auto tool choice accepts no tool_choice auto: nothing to check.
    unit = (out / "tool_parser_without_auto_choice.service").read_text()
    probe = [line for line in unit.splitlines() if "--main-pid" in line][0]
    assert "--tool-check" not in probe and "--reasoning-check" not in probe
    unit = (out / "loopback_default.service").read_text()
    assert "--tool-check" not in unit and "--reasoning-check" not in unit


@pytest.mark.parametrize("case", ["loopback_default", "recipe_flags"])
def test_systemd_accepts_the_watchdog_units(played, case):
    """The watchdog's service and timer as the role writes them next to vllm-tiny.service."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed (systemd package)"
    directory = played[1] / ("verify-watchdog-" + case)
    directory.mkdir()
    shutil.copy(str(played[1] / ("%s-watchdog.service" % case)), str(directory / "vllm-tiny-watchdog.service"))
    shutil.copy(str(played[1] / ("%s-watchdog.timer" % case)), str(directory / "vllm-tiny-watchdog.timer"))
    result = subprocess.run([analyze, "verify", "--man=no", str(directory / "vllm-tiny-watchdog.service"),
                             str(directory / "vllm-tiny-watchdog.timer")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Unknown key" not in result.stderr and "Failed to parse" not in result.stderr, result.stderr


def test_the_watchdog_probes_like_readiness_and_reads_the_key_from_the_environment_file(played):
    out = played[1]
    service = (out / "recipe_flags-watchdog.service").read_text()
    directives = _directives(service)
    assert "Type=oneshot" in directives and "User=root" in directives
    assert "EnvironmentFile=-/etc/vllm/vllm-tiny.env" in directives
    for word in ('"--unit" "vllm-tiny.service"', '"--url" "http://127.0.0.1:8000"', '"--model" "tiny"', '"--failures" "3"',
                 '"--max-restarts" "3"', '"--request-timeout" "30"', '"--state-file" "/var/lib/gauntlet-vllm/watchdog/vllm-tiny.service.json"',
                 '"--textfile-dir" "/var/lib/prometheus/node-exporter"', '"--tool-check"', '"--reasoning-check"'):
        assert word in service
    assert "--tool-check" not in (out / "loopback_default-watchdog.service").read_text()
    timer = _directives((out / "loopback_default-watchdog.timer").read_text())
    for directive in ("OnUnitActiveSec=30", "OnBootSec=30", "AccuracySec=1s", "Unit=vllm-tiny-watchdog.service"):
        assert directive in timer
    secret_service = (out / "secret_env-watchdog.service").read_text()
    assert API_KEY not in secret_service and SECRET not in secret_service


def test_a_ray_plan_runs_vllm_on_the_head_over_the_cluster_without_a_group_watch(played):
    outcomes, out = played[0], played[1]
    assert outcomes["ray_head"]["ok"], outcomes["ray_head"]
    args = outcomes["ray_head"]["args"]
    assert args[args.index("--distributed-executor-backend") + 1] == "ray" and "--headless" not in args
    unit = (out / "ray_head.service").read_text()
    assert '"RAY_ADDRESS=10.0.0.10:6379"' in unit and '"VLLM_HOST_IP=10.0.0.10"' in unit
    assert 'ReadWritePaths="-/var/lib/gauntlet-ray"' in unit
    assert "Wants=vllm-tiny-group.service" not in unit and "Restart=no" in unit
    directives = _directives(unit)
    for directive in ("Wants=gauntlet-ray.service", "After=gauntlet-ray.service", "PartOf=gauntlet-ray.service"):
        assert directive in directives, directives
    # The deployment's one endpoint is the head's: its watchdog kills it when it hangs, never restarts it alone.
    watchdog = (out / "ray_head-watchdog.service").read_text()
    assert '"--group-node"' in watchdog and '"--url" "http://127.0.0.1:8000"' in watchdog
    assert '"--group-node"' not in (out / "loopback_default-watchdog.service").read_text()


@pytest.mark.parametrize("case, words", [
    ("ray_worker_refused", ["vLLM runs on the head alone", "got 1", "ray_cluster"]),
    ("ray_without_address", ["vllm_service_ray_address", "host:port", 'got ""']),
])
def test_a_ray_plan_is_refused_on_a_worker_and_without_the_clusters_address(played, case, words):
    outcome = played[0][case]
    assert not outcome["ok"], outcome
    message = " ".join(outcome["msg"].split())
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("case", ["sleep_mode_loopback", "sleep_mode_network_trusted"])
def test_sleep_mode_flags_the_server_and_opens_its_dev_endpoints(played, case):
    outcomes, out, dummy = played
    assert outcomes[case]["ok"] is True, outcomes[case]
    assert "--enable-sleep-mode" in outcomes[case]["args"]
    assert 'Environment="VLLM_SERVER_DEV_MODE=1"' in (out / ("%s.service" % case)).read_text()
    # Without sleep mode the development endpoints stay closed.
    assert "VLLM_SERVER_DEV_MODE" not in (out / "loopback_default.service").read_text()


def test_sleep_mode_beyond_loopback_is_refused_without_the_networks_word(played):
    outcome = played[0]["sleep_mode_on_the_network"]
    assert outcome["ok"] is False
    assert "vllm_service_dev_endpoints_reachable" in outcome["msg"] and "0.0.0.0" in outcome["msg"]
    assert not (played[1] / "sleep_mode_on_the_network.service").exists()
