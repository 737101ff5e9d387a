# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving import vllm_units

# As systemd 252 prints it (recorded in the rig's bookworm container).
SMOKE_EXEC_START = (
    "{ path=/opt/vllm/venv/bin/vllm ; argv[]=/opt/vllm/venv/bin/vllm serve /opt/models/tiny-llama "
    "--served-model-name tiny-llama --host 127.0.0.1 --port 8000 --max-model-len 1024 --enforce-eager ; "
    "ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
)


def show_block(name, exec_start, environment="", active="active", unit_file="enabled", pid="41"):
    return "\n".join([
        "Id=%s" % name,
        "ActiveState=%s" % active,
        "SubState=%s" % ("running" if active == "active" else "dead"),
        "UnitFileState=%s" % unit_file,
        "MainPID=%s" % pid,
        "ExecStart=%s" % exec_start,
        "Environment=%s" % environment,
        "FragmentPath=/etc/systemd/system/%s" % name,
    ])


def exec_start(argv):
    return "{ path=%s ; argv[]=%s ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }" % (
        argv.split()[0], argv)


def test_parse_show_splits_units_on_blank_lines():
    text = show_block("a.service", SMOKE_EXEC_START) + "\n\n" + show_block("b.service", "") + "\n"
    units = vllm_units.parse_show(text)
    assert [unit["Id"] for unit in units] == ["a.service", "b.service"]
    assert units[0]["ExecStart"] == SMOKE_EXEC_START


def test_exec_start_argv_reads_the_recorded_systemd_252_format():
    assert vllm_units.exec_start_argv(SMOKE_EXEC_START) == [
        "/opt/vllm/venv/bin/vllm", "serve", "/opt/models/tiny-llama", "--served-model-name", "tiny-llama",
        "--host", "127.0.0.1", "--port", "8000", "--max-model-len", "1024", "--enforce-eager"]
    assert vllm_units.exec_start_argv("") == []


@pytest.mark.parametrize("argv, expected", [
    ("/opt/vllm/venv/bin/vllm serve /models/kimi --port 8001", True),
    ("vllm serve moonshotai/Kimi-K2.5", True),
    ("/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model x", True),
    ("/bin/bash -c source /opt/env; exec vllm serve /models/m --tensor-parallel-size 8", True),
    ("/opt/vllm/venv/bin/vllm --version", False),
    ("/usr/bin/python3 /srv/app.py --port 8000", False),
    ("/usr/sbin/vllm-exporter serve", False),
])
def test_is_vllm_command(argv, expected):
    assert vllm_units.is_vllm_command(argv.split()) is expected


def test_describe_unit_reads_port_model_and_devices():
    unit = vllm_units.describe_unit(vllm_units.parse_show(show_block(
        "vllm-kimi-k25-int4.service",
        exec_start("/opt/vllm/venv/bin/vllm serve /models/moonshotai/Kimi-K2.5 --port=8001 --tensor-parallel-size 8"),
        environment='CUDA_VISIBLE_DEVICES=3,1,2 "NCCL_ALGO=Ring,Tree" HF_HUB_OFFLINE=1'))[0])
    assert unit["port"] == 8001
    assert unit["model"] == "/models/moonshotai/Kimi-K2.5"
    assert unit["served_model_name"] == "/models/moonshotai/Kimi-K2.5"
    assert unit["devices"] == ["1", "2", "3"]
    assert unit["running"] is True and unit["enabled"] is True
    assert unit["main_pid"] == 41


def test_describe_unit_defaults_and_non_vllm_units():
    unit = vllm_units.describe_unit(vllm_units.parse_show(show_block(
        "vllm-x.service", exec_start("/opt/v/bin/python -m vllm.entrypoints.openai.api_server --model /m/x"),
        active="inactive", unit_file="disabled", pid="0"))[0])
    assert unit["port"] == vllm_units.DEFAULT_PORT
    assert unit["model"] == "/m/x"
    assert unit["devices"] == vllm_units.ALL_DEVICES
    assert unit["running"] is False and unit["enabled"] is False
    assert vllm_units.describe_unit(vllm_units.parse_show(show_block("ssh.service", exec_start("/usr/sbin/sshd -D")))[0]) is None


@pytest.mark.parametrize("argv, expected", [
    ("/v/bin/vllm serve /models/m --served-model-name kimi --port 8001", "kimi"),
    ("/v/bin/vllm serve /models/m --served-model-name kimi kimi-alias --port 8001", "kimi"),
    ("/v/bin/vllm serve /models/m --served-model-name=kimi", "kimi"),
    ("/v/bin/python -m vllm.entrypoints.openai.api_server --model /m/x --served-model-name x", "x"),
    ("/v/bin/vllm serve /models/m --port 8001", "/models/m"),
])
def test_served_model_name_is_what_clients_ask_for(argv, expected):
    # A readiness probe that sent the model's path instead of this name got 404 until its timeout.
    unit = vllm_units.describe_unit(vllm_units.parse_show(show_block("vllm-m.service", exec_start(argv)))[0])
    assert unit["served_model_name"] == expected


@pytest.mark.parametrize("left, right, overlap", [
    (["0", "1"], ["2", "3"], False),
    (["0", "1"], ["1", "2"], True),
    ("all", ["5"], True),
    (["5"], "all", True),
])
def test_devices_overlap(left, right, overlap):
    assert vllm_units.devices_overlap(left, right) is overlap


def test_parse_devices():
    assert vllm_units.parse_devices(None) == "all"
    assert vllm_units.parse_devices("") == "all"
    assert vllm_units.parse_devices([]) == "all"
    assert vllm_units.parse_devices("4, 5,4") == ["4", "5"]
    assert vllm_units.parse_devices([0, 1]) == ["0", "1"]


def _unit(name, devices, port, running=True, enabled=True):
    return {"name": name, "devices": devices, "port": port, "running": running, "enabled": enabled}


def test_find_conflicts_by_gpu_port_and_state():
    units = [
        _unit("vllm-new.service", ["0", "1"], 8000),                       # the unit itself
        _unit("vllm-same-gpus.service", ["1", "2"], 9000),
        _unit("vllm-other-gpus.service", ["4", "5"], 9001),
        _unit("vllm-same-port.service", ["6"], 8000),
        _unit("vllm-all-gpus.service", "all", 9002, running=False, enabled=True),
        _unit("vllm-dormant.service", "all", 8000, running=False, enabled=False),
    ]
    conflicts = vllm_units.find_conflicts(units, "vllm-new.service", ["0", "1"], 8000)
    assert [item["name"] for item in conflicts] == [
        "vllm-same-gpus.service", "vllm-same-port.service", "vllm-all-gpus.service"]
    assert conflicts[0]["reasons"] == ["shares GPUs 1"]
    assert conflicts[1]["reasons"] == ["listens on port 8000"]
    assert "every GPU" in conflicts[2]["reasons"][0]


def test_every_unit_conflicts_on_a_gpu_less_host():
    units = [_unit("vllm-tiny-llama.service", "all", 8000)]
    conflicts = vllm_units.find_conflicts(units, "vllm-tiny-qwen3-moe.service", "all", 8001)
    assert [item["name"] for item in conflicts] == ["vllm-tiny-llama.service"]


def test_units_served_side_by_side_share_gpus_but_not_a_port():
    units = [_unit("vllm-tiny-llama.service", "all", 8000), _unit("vllm-other.service", "all", 8002),
             _unit("vllm-same-port.service", "all", 8001)]
    conflicts = vllm_units.find_conflicts(units, "vllm-tiny-qwen3-moe.service", "all", 8001,
                                          side_by_side=["vllm-tiny-llama.service", "vllm-same-port.service"])
    # The side-by-side unit on its own port stays; an unlisted unit sharing the GPUs and a listed one on the port go.
    assert [item["name"] for item in conflicts] == ["vllm-other.service", "vllm-same-port.service"]
    assert conflicts[1]["reasons"] == ["listens on port 8001"]


def test_load_phase_follows_the_journal():
    lines = [
        "(APIServer pid=1) INFO [api_utils.py:286] non-default args: {'model': '/m'}",
        "(EngineCore pid=2) INFO [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: ...",
    ]
    assert vllm_units.load_phase(lines) == "starting the engine"
    lines.append("(Worker pid=3) INFO [gpu_model_runner.py:5040] Starting to load model /m...")
    assert vllm_units.load_phase(lines) == "loading weights"
    # tqdm redraws its bar on one line with carriage returns; the last state counts.
    lines.append("Loading safetensors checkpoint shards:   2% Completed | 1/64 [00:31<32:33, 31.0s/it]\r"
                 "Loading safetensors checkpoint shards:  45% Completed | 29/64 [15:02<18:10, 31.1s/it]\r")
    assert vllm_units.load_phase(lines) == "loading weights (shards 29/64, 45%)"
    lines.append("(Worker pid=3) INFO [gpu_model_runner.py:5150] Model loading took 71.2 GiB memory and 2161.4 seconds")
    assert vllm_units.load_phase(lines) == "weights loaded"
    lines.append("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67")
    assert vllm_units.load_phase(lines) == "capturing CUDA graphs"
    lines.append("(APIServer pid=1) INFO [entry.py:140] Starting vLLM server on http://0.0.0.0:8000")
    assert vllm_units.load_phase(lines) == "API server up"
    assert vllm_units.load_phase(["nothing vLLM would say"]) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "0:0:0:0:0:0:0:1",
                                  "::ffff:127.0.0.1", "LOCALHOST"])
def test_every_loopback_address_is_loopback(host):
    assert vllm_units.is_loopback(host)
    assert vllm_units.listen_host(host, False, False) == (host, None)


@pytest.mark.parametrize("host", ["127.example.com", "127.0.0.1.nip.io", "10.0.0.5", "gpu-01"])
def test_a_name_that_only_starts_like_loopback_needs_a_key(host):
    # A prefix test took 127.example.com for loopback and let it serve other machines without a key (issue 34).
    assert not vllm_units.is_loopback(host)
    listen, problem = vllm_units.listen_host(host, False, False)
    assert listen == host and "vllm_service_api_key" in problem
