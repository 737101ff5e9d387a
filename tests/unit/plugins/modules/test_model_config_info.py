# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from ansible_collections.gauntlet.vllm.plugins.modules import model_config_info


def install(model_configs_dir, tmp_path, name):
    """Copy fixture ``<name>.json`` (+ ``<name>_hf_quant.json``) into tmp_path as a model dir."""
    shutil.copy(os.path.join(model_configs_dir, name + ".json"), str(tmp_path / "config.json"))
    sidecar = os.path.join(model_configs_dir, name + "_hf_quant.json")
    if os.path.exists(sidecar):
        shutil.copy(sidecar, str(tmp_path / "hf_quant_config.json"))
    return tmp_path


def test_required_path(run_module):
    result, failed = run_module(model_config_info.main, {})
    assert failed
    assert "path" in result["msg"]


def test_directory_with_sidecar(run_module, model_configs_dir, tmp_path):
    install(model_configs_dir, tmp_path, "nvidia--GLM-5-NVFP4")
    result, failed = run_module(model_config_info.main, {"path": str(tmp_path)})
    assert not failed, result
    assert result["changed"] is False
    model = result["model"]
    assert model["architecture"] == "GlmMoeDsaForCausalLM"
    assert model["num_experts"] == 256
    assert model["mla"]["kv_lora_rank"] == 512
    assert model["quantization"]["method"] == "modelopt_fp4"
    assert model["quantization"]["group_size"] == 16
    assert model["quantization"]["origin"] == "hf_quant_config"
    assert model["source"] == {"config": str(tmp_path / "config.json"),
                               "hf_quant_config": str(tmp_path / "hf_quant_config.json")}


def test_config_file_path(run_module, model_configs_dir):
    path = os.path.join(model_configs_dir, "moonshotai--Kimi-K2.5.json")
    result, failed = run_module(model_config_info.main, {"path": path})
    assert not failed, result
    model = result["model"]
    assert model["text_config"] is True
    assert model["num_attention_heads"] == 64
    assert model["num_experts"] == 384
    assert model["quantization"]["method"] == "compressed-tensors"
    assert model["quantization"]["bits"] == 4
    assert model["source"] == {"config": path, "hf_quant_config": None}
    json.dumps(result)  # plain data


def test_check_mode_identical(run_module, model_configs_dir, tmp_path):
    install(model_configs_dir, tmp_path, "nvidia--Llama-3.1-70B-Instruct-FP8")
    normal, failed = run_module(model_config_info.main, {"path": str(tmp_path)})
    assert not failed, normal
    checked, failed = run_module(model_config_info.main, {"path": str(tmp_path), "_ansible_check_mode": True})
    assert not failed, checked
    assert checked == normal
    assert checked["model"]["quantization"]["method"] == "modelopt"


def test_set_module_args_style(set_module_args, patch_exit_fail, model_configs_dir, tmp_path):
    """community.general style: set_module_args + pytest.raises(AnsibleExitJson)."""
    install(model_configs_dir, tmp_path, "MiniMaxAI--MiniMax-M2.5")
    with set_module_args({"path": str(tmp_path)}):
        with pytest.raises(patch_exit_fail.exit) as exc:
            model_config_info.main()
    model = exc.value.result["model"]
    assert (model["num_attention_heads"], model["num_key_value_heads"]) == (48, 8)
    assert model["quantization"]["block_size"] == [128, 128]


def test_fails_on_bad_config(run_module, model_configs_dir, tmp_path):
    install(model_configs_dir, tmp_path, "meta-llama--Meta-Llama-3.1-70B")
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    config["num_attention_heads"] = "64"
    config_path.write_text(json.dumps(config))
    result, failed = run_module(model_config_info.main, {"path": str(tmp_path)})
    assert failed
    assert result["msg"] == "%s: field 'num_attention_heads' must be a positive integer, got \"64\" (str)" % config_path
    assert "model" not in result


def test_fails_on_directory_without_config(run_module, tmp_path):
    result, failed = run_module(model_config_info.main, {"path": str(tmp_path)})
    assert failed
    assert result["msg"] == "%s: directory does not contain config.json" % tmp_path


def test_fails_on_invalid_json(run_module, tmp_path):
    (tmp_path / "config.json").write_text("not json")
    result, failed = run_module(model_config_info.main, {"path": str(tmp_path / "config.json")})
    assert failed
    assert result["msg"].startswith("%s: invalid JSON" % (tmp_path / "config.json"))


def test_hostile_config_fails_naming_the_file_without_a_traceback(run_module, tmp_path):
    config = tmp_path / "config.json"
    config.write_bytes(b'{"text_config":' + b"[" * 100000 + b"]" * 100000 + b"}")
    result, failed = run_module(model_config_info.main, {"path": str(tmp_path)})
    assert failed and result["msg"] == "%s: invalid JSON: nested too deeply" % config
