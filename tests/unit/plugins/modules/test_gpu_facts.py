# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gauntlet.vllm.plugins.module_utils.host import gpu_info
from ansible_collections.gauntlet.vllm.plugins.modules import gpu_facts
from ansible_collections.gauntlet.vllm.tests.unit.fixtures.gpu.nvml_replay import (
    FakeNVML,
    load_recording,
    nvml_error,
)

HERE = os.path.dirname(os.path.abspath(__file__))
GPU_FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "gpu"))
RECORDING = load_recording(os.path.join(GPU_FIXTURES, "h200-1gpu.nvml.json"))
with open(os.path.join(GPU_FIXTURES, "h200-1gpu.facts.json")) as _facts_file:
    H200_FACTS = json.load(_facts_file)


def without_processes(facts):
    facts = copy.deepcopy(facts)
    for device in facts["devices"]:
        del device["processes"]
    return facts


@pytest.fixture
def use_nvml(monkeypatch):
    """Make the module's ``import pynvml`` give a FakeNVML built from ``recording``."""

    def _use(recording):
        fake = FakeNVML(recording)
        monkeypatch.setattr(gpu_info, "import_nvml", lambda: (fake, None))
        return fake

    return _use


def gpus_of(result):
    assert set(result) >= {"changed", "ansible_facts"}
    assert result["changed"] is False
    assert list(result["ansible_facts"]) == ["gpus"]
    json.dumps(result)
    return result["ansible_facts"]["gpus"]


def test_h200(run_module, use_nvml):
    fake = use_nvml(RECORDING)
    result, failed = run_module(gpu_facts.main, {})
    assert not failed, result
    assert gpus_of(result) == without_processes(H200_FACTS)
    assert fake.log[-1] == "nvmlShutdown()"


def test_h200_include_processes(run_module, use_nvml):
    use_nvml(RECORDING)
    result, failed = run_module(gpu_facts.main, {"include_processes": True})
    assert not failed, result
    assert gpus_of(result) == H200_FACTS


@pytest.mark.parametrize("include_processes", [False, True])
def test_check_mode_gives_the_same_facts(run_module, use_nvml, include_processes):
    use_nvml(RECORDING)
    normal, failed = run_module(gpu_facts.main, {"include_processes": include_processes})
    assert not failed, normal
    checked, failed = run_module(gpu_facts.main, {"include_processes": include_processes, "_ansible_check_mode": True})
    assert not failed, checked
    assert gpus_of(checked) == gpus_of(normal)


def test_driver_missing(run_module, use_nvml):
    use_nvml({"calls": {"nvmlInit()": nvml_error("NVMLError_LibraryNotFound")}})
    result, failed = run_module(gpu_facts.main, {})
    assert not failed, result
    gpus = gpus_of(result)
    assert gpus["count"] == 0
    assert gpus["devices"] == []
    assert gpus["topology"] == {"nvlink": False, "links": []}
    assert gpus["reason"] == "NVML could not be initialised: NVML Shared Library Not Found (NVMLError_LibraryNotFound)"


def test_pynvml_missing(run_module, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    result, failed = run_module(gpu_facts.main, {"include_processes": True})
    assert not failed, result
    gpus = gpus_of(result)
    assert gpus["count"] == 0
    assert gpus["reason"].startswith("pynvml (nvidia-ml-py) is not installed on the target")


def test_this_host(run_module):
    """The real pynvml path on the test host (no GPU here: count 0 and a reason)."""
    result, failed = run_module(gpu_facts.main, {})
    assert not failed, result
    gpus = gpus_of(result)
    assert gpus["count"] == len(gpus["devices"])
    assert (gpus["reason"] is None) == (gpus["count"] > 0)


def test_unexpected_error_fails_cleanly(run_module, use_nvml):
    recording = copy.deepcopy(RECORDING)
    recording["calls"]["nvmlDeviceGetName(gpu0)"] = {"__exception__": "RuntimeError", "message": "unexpected"}
    fake = use_nvml(recording)
    result, failed = run_module(gpu_facts.main, {})
    assert failed
    assert result["msg"].startswith("Unexpected error while reading NVML: ")
    assert fake.log[-1] == "nvmlShutdown()"


def test_unknown_option(run_module, use_nvml):
    use_nvml(RECORDING)
    result, failed = run_module(gpu_facts.main, {"gpu": 0})
    assert failed
    assert "gpu" in result["msg"]


def documented(node):
    """RETURN ``contains`` tree -> nested dict of documented keys."""
    return dict((key, documented(value.get("contains", {}))) for key, value in node.items())


def keys_of(facts):
    tree = {}
    for key, value in facts.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            merged = {}
            for item in value:
                merged.update(item)
            value = merged
        tree[key] = keys_of(value) if isinstance(value, dict) else {}
    return tree


def test_return_documents_every_key():
    facts = copy.deepcopy(H200_FACTS)
    facts["topology"]["links"] = [{"a": 0, "b": 1, "type": "NVLINK", "nvlink_count": 18}]
    facts["devices"][0]["processes"] = [{"pid": 1, "used_memory_bytes": 2}]
    doc = documented(yaml.safe_load(gpu_facts.RETURN))
    assert doc == {"ansible_facts": {"gpus": keys_of(facts)}}


def test_documentation_options_match_argument_spec():
    doc = yaml.safe_load(gpu_facts.DOCUMENTATION)
    assert doc["module"] == "gpu_facts"
    assert set(doc["options"]) == {"include_processes"}
    assert doc["options"]["include_processes"]["default"] is False
    # The attributes come partly from doc fragments: read them as ansible-doc renders them.
    rendered = subprocess.run([shutil.which("ansible-doc"), "--json", "gauntlet.vllm.gpu_facts"],
                              check=True, capture_output=True, text=True).stdout
    attributes = json.loads(rendered)["gauntlet.vllm.gpu_facts"]["doc"]["attributes"]
    assert attributes["check_mode"]["support"] == "full"
    assert attributes["facts"]["support"] == "full"
    yaml.safe_load(gpu_facts.EXAMPLES)
