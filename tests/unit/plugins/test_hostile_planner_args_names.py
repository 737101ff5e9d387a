# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 34, the planner's inputs, the args checker, recipes, Hub ids and the roles' name checks, attacked the
way a careless operator or an attacker would: NaN and infinity where a number is expected, a trailing newline on
a name (``re.match('^name$')`` accepts ``"name\\n"``), gpu facts of the wrong shape, CUDA's ``-1``, and a
destination under a regular file. Each case fails with a message naming the option and the value, never a
traceback, and never passes silently.

The role checks are run by ansible-playbook once (one play, each case in a block whose rescue keeps the failure
message), and each case is then read from what that play printed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gauntlet.vllm.plugins.module_utils.checkpoint import digest_cache, hub
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import model_space, vllm_args, vllm_recipes
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import ModelConfigError
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import PlanFailed, run
from ansible_collections.gauntlet.vllm.plugins.modules import model_space_check, vllm_args_check
from ansible_collections.gauntlet.vllm.tests.integration.playbook_runner import printed_json, run_playbook


# ---- 1. vllm_args_check: NaN and infinity in numeric serving settings ------------------------------------------

@pytest.fixture
def venv(tmp_path):
    """A venv folder with a bin/python, never run: the module must refuse before it checks anything."""
    os.makedirs(str(tmp_path / "venv" / "bin"))
    (tmp_path / "venv" / "bin" / "python").write_text(u"")
    return str(tmp_path / "venv")


def test_a_nan_gpu_memory_utilization_fails_the_args_check_naming_it(run_module, venv):
    result, failed = run_module(vllm_args_check.main, {"venv": venv, "model": "/srv/models/tiny",
                                                       "serving": {"gpu_memory_utilization": "nan"}})
    assert failed, result
    assert "gpu_memory_utilization" in result["msg"] and "nan" in result["msg"]


NUMERIC_SERVING = [name for name, kind, _default in vllm_args.SERVING_SPEC if kind in ("int", "float")]


@pytest.mark.parametrize("name", NUMERIC_SERVING)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), "nan", "inf", "-Infinity"])
def test_every_numeric_serving_setting_refuses_a_non_finite_number_naming_it(name, value):
    with pytest.raises(vllm_args.ArgsBuildError) as raised:
        vllm_args.build_serve_args({"model": "/srv/models/tiny", "serving": {name: value}})
    assert name in str(raised.value) and str(value).lower().lstrip("-")[:3] in str(raised.value).lower()


# ---- 2. recipes: names fully matched, env values on one line ----------------------------------------------------

def _recipe(**fields):
    return {"name": "tiny", "match": {"architectures": ["TinyForCausalLM"]}, "fields": fields}


def test_a_recipe_env_name_with_a_trailing_newline_is_refused_naming_it():
    with pytest.raises(vllm_recipes.RecipeError) as raised:
        vllm_recipes.check_recipe(_recipe(env={"FOO\n": "1"}), "recipes[0]")
    assert "recipes[0] (recipe tiny).fields.env" in str(raised.value) and repr("FOO\n") in str(raised.value)


@pytest.mark.parametrize("field, value", [("env", {"FOO": "1\nExecStartPre=/bin/sh"}), ("env", {"FOO": "a\x00b"}),
                                          ("tool_call_parser", "hermes\n"), ("chat_template", "a\u2028b")])
def test_a_recipe_value_written_into_a_unit_must_be_one_line(field, value):
    with pytest.raises(vllm_recipes.RecipeError) as raised:
        vllm_recipes.check_recipe(_recipe(**{field: value}), "recipes[0]")
    assert "recipes[0] (recipe tiny).fields.%s" % field in str(raised.value)


@pytest.mark.parametrize("recipe, where", [
    (dict(_recipe(), name="tiny\n"), "recipes[0].name"),
    (_recipe(speculative={"method": "mtp", "num_speculative_tokens": 1, "extra\n": 1}), "speculative: bad key"),
])
def test_recipe_names_and_keys_with_a_trailing_newline_are_refused(recipe, where):
    with pytest.raises(vllm_recipes.RecipeError) as raised:
        vllm_recipes.check_recipe(recipe, "recipes[0]")
    assert where in str(raised.value)


def test_a_cached_digest_with_a_trailing_newline_is_not_taken(tmp_path):
    cache = tmp_path / "digests.json"
    digest = "ab" * 32
    cache.write_text(json.dumps({digest_cache.CACHE_MARKER: digest_cache.CACHE_VERSION, "files": {
        "/m/a": {"key": [1, 2, 3, 4, 5], "sha256": digest}, "/m/b": {"key": [1, 2, 3, 4, 5], "sha256": digest + "\n"}}}))
    entries, warning = digest_cache.load_cache(str(cache))
    assert warning is None and sorted(entries) == ["/m/a"]


# ---- 3. Hub repo ids ---------------------------------------------------------------------------------------------

def test_a_hub_repo_id_with_a_trailing_newline_is_refused_naming_it():
    with pytest.raises(ModelConfigError) as raised:
        hub.load_any_model_config("Qwen/Qwen3-8B\n", endpoint="http://127.0.0.1:9")
    assert json.dumps("Qwen/Qwen3-8B\n") in str(raised.value) and "repo id" in str(raised.value)
    with pytest.raises(ModelConfigError) as raised:
        hub.fetch_hub_file("Qwen/Qwen3-8B\n", "config.json", endpoint="http://127.0.0.1:9")
    assert json.dumps("Qwen/Qwen3-8B\n") in str(raised.value)
    assert not hub.is_repo_id("Qwen/Qwen3-8B\n")


# ---- 5. the planner's gpu facts and visible devices --------------------------------------------------------------

def _plan_params(**extra):
    params = {"model": "Qwen/Qwen3-8B", "revision": "main", "hf_endpoint": None, "hf_token": None, "gpus": None,
              "nodes": None, "nodes_gpu_facts": None, "internode_link": None, "executor_backend": "mp",
              "gpu_memory_gib": None, "gpu_name": None, "link": None, "gpu_facts": None, "allreduce_probe": None,
              "vllm_version": "0.28.0", "gpu_memory_utilization": None, "max_model_len": None, "kv_cache_dtype": None,
              "plan": None, "fail_on_invalid": True, "objective": "throughput", "workload": None, "ttft_p99_ms": None,
              "min_user_tokens_per_s": None, "calibration": None, "device_spec": None, "enforce_eager": False,
              "visible_devices": [], "recipe": "auto", "recipes": [], "serving": {}}
    params.update(extra)
    return params


def _never_load(*args):
    raise AssertionError("the model was read although the inputs are bad")


GOOD_DEVICE = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 85520809984}


@pytest.mark.parametrize("option, facts, field", [
    ("gpu_facts", {"count": 8, "devices": "H100"}, "gpu_facts.devices"),
    ("gpu_facts", {"count": 1, "devices": [GOOD_DEVICE], "topology": "nvlink"}, "gpu_facts.topology"),
    ("gpu_facts", {"count": 1, "devices": [GOOD_DEVICE], "topology": ["nvlink"]}, "gpu_facts.topology"),
    ("gpu_facts", {"count": 1, "devices": ["H100"]}, "gpu_facts.devices[0]"),
    ("gpu_facts", {"count": 1, "devices": [dict(GOOD_DEVICE, memory_total_bytes="80GB")]},
     "gpu_facts.devices[0].memory_total_bytes"),
    ("gpu_facts", {"count": 1, "devices": [dict(GOOD_DEVICE, memory_total_bytes=float("nan"))]},
     "gpu_facts.devices[0].memory_total_bytes"),
    ("gpu_facts", {"count": 1, "devices": [dict(GOOD_DEVICE, memory_total_bytes=10 ** 400)]},
     "gpu_facts.devices[0].memory_total_bytes"),
    ("gpu_facts", {"count": "8", "devices": []}, "gpu_facts.count"),
    ("nodes_gpu_facts", [{"count": 8, "devices": "H100"}], "nodes_gpu_facts[0].devices"),
    ("nodes_gpu_facts", [{"count": 8, "devices": [GOOD_DEVICE]}, {"count": 8, "devices": [GOOD_DEVICE], "topology": 1}],
     "nodes_gpu_facts[1].topology"),
    ("nodes_gpu_facts", [{"count": 8, "devices": [GOOD_DEVICE]}, "gpus"], "nodes_gpu_facts[1]"),
])
def test_gpu_facts_of_the_wrong_shape_are_refused_naming_the_field(option, facts, field):
    with pytest.raises(PlanFailed) as raised:
        run(_plan_params(**{option: facts}), _never_load)
    assert str(raised.value).startswith(field + " "), str(raised.value)


@pytest.mark.parametrize("devices, bad", [(["-1"], "-1"), (["0", "-1"], "-1"), (["1.5"], "1.5"), (["gpu0"], "gpu0"),
                                          ("0,x", "x")])
def test_visible_devices_that_are_no_device_are_refused_naming_the_value(devices, bad):
    with pytest.raises(PlanFailed) as raised:
        run(_plan_params(gpus=8, visible_devices=devices), _never_load)
    assert "visible_devices" in str(raised.value) and "'%s'" % bad in str(raised.value)


# ---- 6. model_space_check: a destination under a regular file ----------------------------------------------------

def test_a_destination_under_a_regular_file_does_not_fit_and_names_the_file(tmp_path, run_module):
    blocker = tmp_path / "hostname"
    blocker.write_text(u"host\n")
    dest = str(blocker / "models" / "x")
    result = model_space.check_space(dest, {"model.safetensors": 10})
    assert result["fits"] is False
    assert str(blocker) in result["msg"] and "cannot be created" in result["msg"]
    result, failed = run_module(model_space_check.main, {"path": dest, "files": {"model.safetensors": 10}})
    assert failed and str(blocker) in result["msg"] and "cannot be created" in result["msg"]
    result, failed = run_module(model_space_check.main, {"path": dest, "files": {"a": 1}, "fail_on_error": False})
    assert not failed and result["fits"] is False


def test_a_destination_under_a_dangling_symlink_does_not_fit_and_names_the_link(tmp_path):
    link = tmp_path / "models"
    link.symlink_to(tmp_path / "gone")
    result = model_space.check_space(str(link / "x"), {"model.safetensors": 10})
    assert result["fits"] is False and str(link) in result["msg"]


# ---- 4. the roles' name checks and the values written into units ------------------------------------------------
# (case, role, tasks_from, vars, what the failure must name: the variable, and the value as JSON unless secret)

MULTINODE_PLAN = {"name": "TP8-DP2", "nodes": 2, "valid": True, "vllm_args": ["--tensor-parallel-size", "8"],
                  "launch": {"mode": "dp", "nodes": [{"node_rank": 0, "args": []}, {"node_rank": 1, "args": []}]}}
RAY_PLAN = dict(MULTINODE_PLAN, launch=dict(MULTINODE_PLAN["launch"], mode="ray"))
SERVICE = {"vllm_service_name": "tiny", "vllm_service_model": "Qwen/Qwen3-8B"}
INJECTED = "\nExecStartPre=/bin/true"
ROLE_CASES = [
    ("service_name", "vllm_service", "preflight", dict(SERVICE, vllm_service_name="tiny\n"),
     ["vllm_service_name", json.dumps("tiny\n")]),
    ("service_head_address", "vllm_service", "preflight",
     dict(SERVICE, vllm_service_plan=MULTINODE_PLAN, vllm_service_node_rank=0, vllm_service_head_address="10.0.0.1\n",
          vllm_service_node_address="10.0.0.1\n", vllm_service_group_peers=["10.0.0.2"]),
     ["vllm_service_head_address", json.dumps("10.0.0.1\n")]),
    ("service_peer", "vllm_service", "preflight",
     dict(SERVICE, vllm_service_plan=MULTINODE_PLAN, vllm_service_node_rank=0, vllm_service_head_address="10.0.0.1",
          vllm_service_node_address="10.0.0.1", vllm_service_group_peers=["10.0.0.2\n"]),
     ["vllm_service_group_peers", json.dumps("10.0.0.2\n")]),
    ("service_ray_address", "vllm_service", "preflight",
     dict(SERVICE, vllm_service_plan=RAY_PLAN, vllm_service_node_rank=0, vllm_service_head_address="10.0.0.1",
          vllm_service_node_address="10.0.0.1", vllm_service_ray_address="10.0.0.1:6379\n"),
     ["vllm_service_ray_address", json.dumps("10.0.0.1:6379\n")]),
    ("service_env_name", "vllm_service", "preflight", dict(SERVICE, vllm_service_environment={"FOO\n": "1"}),
     ["vllm_service_environment", json.dumps("FOO\n")]),
    ("service_env_value", "vllm_service", "preflight", dict(SERVICE, vllm_service_serving={"env": {"FOO": "1" + INJECTED}}),
     ["vllm_service_serving.env", "FOO"]),
    ("service_secret_value", "vllm_service", "preflight", dict(SERVICE, vllm_service_secret_env={"TOKEN": "s3cret" + INJECTED}),
     ["vllm_service_secret_env", "TOKEN"]),
    ("service_served_model_name", "vllm_service", "preflight", dict(SERVICE, vllm_service_served_model_name="tiny" + INJECTED),
     ["vllm_service_served_model_name"]),
    ("service_extra_args", "vllm_service", "preflight", dict(SERVICE, vllm_service_serving={"extra_args": ["--seed" + INJECTED]}),
     ["vllm_service_serving.extra_args"]),
    ("service_user", "vllm_service", "preflight", dict(SERVICE, vllm_service_user="vllm" + INJECTED), ["vllm_service_user"]),
    ("bench_name", "vllm_bench", "decide", {"vllm_bench_model": "tiny", "vllm_bench_name": "run\n"},
     ["vllm_bench_name", json.dumps("run\n")]),
    ("ray_head_address", "ray_cluster", "preflight",
     {"ray_cluster_state": "started", "ray_cluster_nodes": 2, "ray_cluster_node_rank": 0,
      "ray_cluster_head_address": "10.0.0.1\n", "ray_cluster_node_address": "10.0.0.1\n"},
     ["ray_cluster_head_address", json.dumps("10.0.0.1\n")]),
    ("ray_version", "ray_cluster", "preflight",
     {"ray_cluster_state": "started", "ray_cluster_nodes": 2, "ray_cluster_node_rank": 0, "ray_cluster_version": "2.40.0\n",
      "ray_cluster_head_address": "10.0.0.1", "ray_cluster_node_address": "10.0.0.1"},
     ["ray_cluster_version", json.dumps("2.40.0\n")]),
    ("ray_user", "ray_cluster", "preflight",
     {"ray_cluster_state": "started", "ray_cluster_nodes": 2, "ray_cluster_node_rank": 0, "ray_cluster_user": "ray" + INJECTED,
      "ray_cluster_head_address": "10.0.0.1", "ray_cluster_node_address": "10.0.0.1"}, ["ray_cluster_user"]),
    ("ray_env_name", "ray_cluster", "preflight",
     {"ray_cluster_state": "started", "ray_cluster_nodes": 2, "ray_cluster_node_rank": 0, "ray_cluster_environment": {"FOO\n": "1"},
      "ray_cluster_head_address": "10.0.0.1", "ray_cluster_node_address": "10.0.0.1"},
     ["ray_cluster_environment", json.dumps("FOO\n")]),
    ("install_version", "vllm_install", "preflight", {"vllm_install_version": "0.28.0\n"},
     ["vllm_install_version", json.dumps("0.28.0\n")]),
    ("fetch_repo_id", "model_fetch", "preflight", {"model_fetch_repo_id": "Qwen/Qwen3-8B\n"},
     ["model_fetch_repo_id", json.dumps("Qwen/Qwen3-8B\n")]),
    ("deploy_repo_id", "vllm_deploy", "entry",
     {"vllm_deploy_model": "tiny", "vllm_deploy_vllm_version": "0.28.0",
      "vllm_deploy_models": {"tiny": {"repo_id": "Qwen/Qwen3-8B\n"}}},
     ["vllm_deploy_models.tiny.repo_id", json.dumps("Qwen/Qwen3-8B\n")]),
    ("gauntlet_name", "vllm_gauntlet", "preflight",
     {"vllm_gauntlet_name": "g\n", "vllm_gauntlet_candidates": [{"name": "a", "model": "missing"}]},
     ["vllm_gauntlet_name", json.dumps("g\n")]),
    ("gauntlet_candidate_name", "vllm_gauntlet", "preflight",
     {"vllm_gauntlet_name": "g", "vllm_gauntlet_candidates": [{"name": "a\n", "model": "missing"}]},
     ["vllm_gauntlet_candidates[0].name", json.dumps("a\n")]),
]

# The same checks pass what they must: values like these run in production.
ROLE_CONTROLS = [
    ("service_ok", "vllm_service", "preflight",
     dict(SERVICE, vllm_service_environment={"FOO": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
          vllm_service_nccl_environment={"NCCL_IB_DISABLE": "1"}, vllm_service_gpus=[0, 1],
          vllm_service_serving={"extra_args": ["--seed", "1"], "env": {"BAR": "x y"}},
          vllm_service_read_write_paths=["/srv/cache", "-/srv/maybe"])),
    ("service_multinode_ok", "vllm_service", "preflight",
     dict(SERVICE, vllm_service_plan=MULTINODE_PLAN, vllm_service_node_rank=0, vllm_service_head_address="10.0.0.1",
          vllm_service_node_address="10.0.0.1", vllm_service_group_peers=["10.0.0.2"])),
    ("bench_ok", "vllm_bench", "decide", {"vllm_bench_model": "tiny", "vllm_bench_name": "run-1.2_a"}),
    ("install_ok", "vllm_install", "preflight", {"vllm_install_version": "0.32.0+cpu"}),
    ("deploy_ok", "vllm_deploy", "entry",
     {"vllm_deploy_model": "tiny", "vllm_deploy_vllm_version": "0.28.0", "vllm_deploy_models": {"tiny": {"repo_id": "Qwen/Qwen3-8B"}}}),
]


def _case_tasks(case, role, tasks_from, variables):
    """One case: the role's check tasks with hostile variables; its failure message (or PASSED) kept by name."""
    keep = "{{ __results | combine({%s: %s}) }}"
    return {"name": "Case " + case, "block": [
        {"ansible.builtin.include_role": {"name": "gauntlet.vllm." + role, "tasks_from": tasks_from}, "vars": variables},
        {"ansible.builtin.set_fact": {"__results": keep % (json.dumps(case), "'PASSED'")}},
    ], "rescue": [
        {"ansible.builtin.set_fact": {"__results": keep % (json.dumps(case), "([ansible_failed_result.msg | default('')] + "
                                                           "ansible_failed_result.results | default([]) | selectattr('failed') "
                                                           "| map(attribute='msg') | list) | join(' ')")}},
    ]}


@pytest.fixture(scope="module")
def role_failures(tmp_path_factory):
    """Every ROLE_CASES case run in one play (one ansible-playbook start): case -> failure message or PASSED."""
    tasks = [{"ansible.builtin.set_fact": {"__results": {}}}]
    tasks += [_case_tasks(case, role, tasks_from, variables) for case, role, tasks_from, variables, _names in ROLE_CASES]
    tasks += [_case_tasks(case, role, tasks_from, variables) for case, role, tasks_from, variables in ROLE_CONTROLS]
    tasks.append({"ansible.builtin.debug": {"msg": "RESULTS={{ __results | to_json }}"}})
    playbook = tmp_path_factory.mktemp("roles") / "play.yml"
    # JSON is YAML: the hostile values go in exactly as written here.
    playbook.write_text(json.dumps([{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]))
    result = run_playbook([playbook], json_results=True)
    results = printed_json(result.stdout, "RESULTS")
    assert results is not None, result.stdout[-3000:] + result.stderr[-2000:]
    return results


@pytest.mark.parametrize("case, names", [(case[0], case[4]) for case in ROLE_CASES], ids=[case[0] for case in ROLE_CASES])
def test_role_checks_refuse_a_trailing_newline_or_a_line_break_naming_the_variable(role_failures, case, names):
    message = role_failures[case]
    assert message != "PASSED", "%s: the hostile value passed the role's checks" % case
    for name in names:
        assert name in message, "%s: %r not in %r" % (case, name, message)
    assert "ExecStartPre" not in message and "s3cret" not in message


@pytest.mark.parametrize("case", [control[0] for control in ROLE_CONTROLS])
def test_role_checks_pass_good_names_and_values(role_failures, case):
    assert role_failures[case] == "PASSED", role_failures[case]
