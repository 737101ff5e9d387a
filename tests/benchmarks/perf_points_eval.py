# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The performance model against measurements: the public points of perf_points.py and the H200
recordings of tests/unit/fixtures/perf/. Used by bench_perf_model.py (which prints) and by the unit
tests (which check that every point is evaluated, not how close it is)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_traffic
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_error_bands
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_perf
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.model_config import load_model_config
from perf_points import POINTS  # pylint: disable=import-error
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_plan import evaluate_plan_for, plan_model

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL_CONFIGS = os.path.join(TESTS, "unit", "fixtures", "model_configs")
PERF_FIXTURES = os.path.join(TESTS, "unit", "fixtures", "perf")
GPU_NAMES = {"RTX PRO 6000": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "H100": "NVIDIA H100 80GB HBM3",
             "H200": "NVIDIA H200", "B200": "NVIDIA B200"}
# A served quantization other than the fixture checkpoint's (an AWQ re-quantization of an FP8 model):
# the normalised quantization dict that stands for it.
SERVED_QUANTIZATION = {
    "int4 awq w4a16": {"method": "awq", "scheme": "awq int4", "bits": 4, "group_size": 128, "block_size": None,
                       "kv_cache_dtype": None, "ignored_modules": ["gate", "lm_head"], "origin": "perf_points_eval"},
}
# Context the sources give in words (the id says which): tokens already in the cache when decoding.
CONTEXT_BY_ID = (("ctx100k", 100000), ("ctx128k", 128000), ("ctx40k", 40000))
# Points the model cannot stand for, with the reason (printed as skipped, never counted).
NOT_MODELLED = {
    "rtx6k-kimi-k25-tp8-dcp8-p2p-ctx100k-c1": "decode context parallel (DCP8) splits the long context's KV over the "
                                              "ranks; the model does not know DCP",
    "rtx6k-kimi-k25-tp8-dcp8-c100-ctx40k": "decode context parallel (DCP8) multiplies the KV capacity by 8 at 40k "
                                           "context; the model does not know DCP",
    "h200-kimi-k2-thinking-int4-tp8-rr100": "open-loop run at 100 requests/s far past KV capacity (mean TTFT 271 s): "
                                            "preemption and recompute, not a closed-loop level",
}
DEFAULT_INPUT_LEN = 512
DEFAULT_OUTPUT_LEN = 512


def load(stem):
    sidecar = os.path.join(MODEL_CONFIGS, stem + "_hf_quant.json")
    return load_model_config(os.path.join(MODEL_CONFIGS, stem + ".json"),
                             hf_quant_path=sidecar if os.path.exists(sidecar) else None, discover_hf_quant=False)


def _point_model(point):
    path = os.path.join(MODEL_CONFIGS, point["model"] + ".json")
    if not os.path.exists(path):
        return None, "no model config fixture for %s" % point["model"]
    model = load(point["model"])
    served = SERVED_QUANTIZATION.get(point["quantization"])
    if served:
        model = dict(model, quantization=served)
    return model, None


def _workload(point):
    input_len = point["input_len"] or DEFAULT_INPUT_LEN
    for marker, context in CONTEXT_BY_ID:
        if marker in point["id"]:
            input_len = context
    output_len = point["output_len"] or DEFAULT_OUTPUT_LEN
    return {"input_len": input_len, "output_len": output_len, "concurrency": [point["concurrency"]]}


def _predicted(level, metric):
    if metric == "user_tokens_per_s":
        return level["user_tokens_per_s"]
    return level[metric]


def evaluate_point(point):
    """(row, None) with the prediction for ``point``, or (None, why it cannot be evaluated)."""
    if point["id"] in NOT_MODELLED:
        return None, NOT_MODELLED[point["id"]]
    model, why = _point_model(point)
    if model is None:
        return None, why
    workload = _workload(point)
    max_len = max(workload["input_len"] + workload["output_len"], 4096)
    gpu_name = GPU_NAMES.get(point["gpu"], point["gpu"])
    inputs = plan_model(model, point["gpus"], None, "0.32.0", max_model_len=max_len, gpu_name=gpu_name,
                        link=point["link"], workload=workload)["inputs"]
    plan = {"tp": point["tp"], "pp": point["pp"], "dp": point["dp"], "ep": point["ep"]}
    result = evaluate_plan_for(model, plan, inputs, gpu_name=gpu_name, link=point["link"])
    level = result["estimate"]["levels"][0]
    predicted = _predicted(level, point["metric"])
    if not predicted:
        return None, "the model predicts no figure (%s)" % level["limited_by"]
    error = (predicted - point["value"]) / point["value"] * 100.0
    return {"id": point["id"], "gpu": point["gpu"], "gpus": point["gpus"], "plan": result["name"],
            "concurrency": point["concurrency"], "metric": point["metric"], "measured": point["value"],
            "predicted": predicted, "error_pct": round(error, 1)}, None


def evaluate_points(points=POINTS):
    rows, skipped = [], []
    for point in points:
        row, why = evaluate_point(point)
        if row:
            rows.append(row)
        else:
            skipped.append((point["id"], why))
    return rows, skipped


# Recordings whose batched steps do not stand for real serving: with dummy weights the router's scores
# are all about sigmoid(0) = 0.5 and the random e_score_correction_bias decides, so every token picks the
# same experts (the step at B=16 equals the step at B=1). Their B=1 rows are kept.
ROUTING_COLLAPSED = {
    "minimax_m2.5_l16": "dummy weights: sigmoid router + correction bias send every token to the same experts",
    "kimi_k2.5_l6": "dummy weights: sigmoid router + correction bias send every token to the same experts",
}
# The recordings' models whose quantization sits in a ModelOpt sidecar, and where it is.
H200_SIDECARS = {"llama3.1_70b_fp8": "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant.json"}


def _recording(filename):
    """The recording ``filename`` of tests/unit/fixtures/perf/, or None where it is absent."""
    path = os.path.join(PERF_FIXTURES, filename)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)


def h200_recordings():
    """Decode steps of the H200 recordings (tests/unit/fixtures/perf/h200-vllm-0.24.json): the model's step time
    for each batch against vLLM's measured one (real vLLM 0.24.0, dummy weights, one H200)."""
    recording = _recording("h200-vllm-0.24.json")
    if recording is None:
        return []
    rows = []
    for name, entry in sorted((recording.get("models") or {}).items()):
        if entry.get("returncode") != 0 or not entry.get("config"):
            continue
        rows.extend(_h200_model_rows(name, entry, recording.get("input_len") or 256))
    return rows


def recorded_step_model(name, entry, gpu="NVIDIA H200"):
    """The planner's StepModel for one recorded model (its config.json in ``entry``) on one ``gpu`` (TP1), eager as
    it was run."""
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_hardware
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_memory
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_perf
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_memory import kv_bytes_per_token, layer_signatures
    sidecar = H200_SIDECARS.get(name)
    hf_quant = None
    if sidecar:
        with open(os.path.join(MODEL_CONFIGS, sidecar)) as handle:
            hf_quant = json.load(handle)
    model = load_model_config_from_dict(entry["config"], hf_quant)
    plan = {"tp": 1, "pp": 1, "dp": 1, "ep": False}
    spec_name, spec = vllm_hardware.gpu_spec(gpu)
    kv_dtype = (entry.get("engine_args") or {}).get("kv_cache_dtype") or (model.get("quantization") or {}).get("kv_cache_dtype")
    stages = vllm_memory.stage_profiles(model, plan, layer_signatures(model))
    return vllm_perf.StepModel(model, plan, spec, spec["link"], stages, kv_bytes_per_token(model, plan, kv_dtype),
                               eager=bool((entry.get("engine_args") or {}).get("enforce_eager")))


def _h200_model_rows(name, entry, input_len):
    step = recorded_step_model(name, entry)
    rows = []
    for run in (entry.get("derived") or {}).get("decode") or []:
        # (T65 - T17) / 48: decode steps with 256 + 17 to 256 + 65 tokens cached.
        predicted = sum(step.decode_breakdown(run["B"], input_len + 41).values()) * 1e3
        rows.append({"model": name, "batch": run["B"], "measured_ms": run["step_ms"], "predicted_ms": predicted,
                     "error_pct": round((predicted - run["step_ms"]) / run["step_ms"] * 100.0, 1),
                     "not_counted": ROUTING_COLLAPSED.get(name) if run["B"] > 1 else None})
    return rows


# vLLM 0.24's LLM class on a GPU of 70 GiB and more (UsageContext.LLM_CLASS): the recording's step budget.
H200_LLM_BATCHED_TOKENS = 16384


def h200_waves():
    """Whole waves of the H200 recordings, left out of the step model's fit: ``B`` prompts of 256 tokens given
    to LLM.generate at once, with 1, 17 or 65 output tokens (T1 is when the wave's last first token comes, its
    TTFT p100; T17 and T65 when the wave ends), and 8 prompts of 2048. Predicted by the scheduler simulation
    (vllm_sched: the prompts prefilled in 16384-token steps, then decoded together) and, for T1, by the closed
    form's last request of a wave (vllm_perf.level's ttft_p99, less its request overhead: offline has none)."""
    recording = _recording("h200-vllm-0.24.json")
    if recording is None:
        return []
    input_len = recording.get("input_len") or 256
    rows = []
    for name, entry in sorted((recording.get("models") or {}).items()):
        if entry.get("returncode") != 0 or not entry.get("config"):
            continue
        step = recorded_step_model(name, entry)
        derived = entry.get("derived") or {}
        for run in derived.get("decode") or []:
            for output_len, key in ((1, "T1_s"), (17, "T17_s"), (65, "T65_s")):
                rows.append(_wave_row(name, step, run["B"], input_len, output_len, run[key] * 1e3))
        large = derived.get("prefill_large")
        if large:
            rows.append(_wave_row(name, step, large["B"], large["input_len"], 1, large["ms"]))
    return rows


def _wave_row(name, step, batch, input_len, output_len, measured_ms):
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_perf
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_sched
    limits = {"max_num_seqs": 256, "max_num_batched_tokens": H200_LLM_BATCHED_TOKENS}
    workload = {"input_len": input_len, "output_len": output_len, "requests_per_level": batch}
    count, dummy, dummy2, cap, busy = vllm_sched.level_traffic(workload, 1, concurrency=batch)
    clients = vllm_sched.Traffic([(input_len, output_len)] * count, [0.0] * count, cap, 0, 0.0)
    engine = vllm_sched.Engine(limits, 10 ** 7, False)
    seconds = vllm_sched.run_engine(engine, clients, vllm_sched.StepCosts(step, busy))
    simulated = (max(r.first_token for r in clients.requests) if output_len == 1 else seconds) * 1e3
    closed_form = None
    if output_len == 1:
        level = vllm_perf.level(step, batch, 1, dict(workload, concurrency=[batch]), batch, limits)
        closed_form = level["ttft_p99_ms"] - vllm_perf.REQUEST_OVERHEAD_MS
    return {"model": name, "kind": vllm_error_bands.model_kind(step.model), "batch": batch, "input_len": input_len,
            "output_len": output_len, "measured_ms": measured_ms, "simulated_ms": simulated,
            "simulated_error_pct": round((simulated - measured_ms) / measured_ms * 100.0, 1),
            "closed_form_ms": closed_form,
            "closed_form_error_pct": round((closed_form - measured_ms) / measured_ms * 100.0, 1) if closed_form else None,
            # Every wave prefills at least 256 tokens of one prompt: they all route alike too.
            "not_counted": ROUTING_COLLAPSED.get(name)}


def load_model_config_from_dict(config, hf_quant_config=None):
    """A recorded config.json (and hf_quant_config.json) normalised as load_model_config does."""
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="perf-model-")
    try:
        with open(os.path.join(folder, "config.json"), "w") as handle:
            json.dump(config, handle)
        sidecar = None
        if hf_quant_config:
            sidecar = os.path.join(folder, "hf_quant_config.json")
            with open(sidecar, "w") as handle:
                json.dump(hf_quant_config, handle)
        return load_model_config(os.path.join(folder, "config.json"), hf_quant_path=sidecar, discover_hf_quant=False)
    finally:
        # One folder per call otherwise stays in /tmp (a few hundred after a day of benchmarks).
        shutil.rmtree(folder, ignore_errors=True)


REFERENCE_MODELS = ("moonshotai--Kimi-K2.5", "nvidia--Kimi-K2.5-NVFP4", "MiniMaxAI--MiniMax-M2.5")
REFERENCE_WORKLOAD = {"input_len": 1000, "output_len": 1000, "concurrency": [1, 8, 32, 128, 256, 1024]}


def reference_box(objective="throughput", vllm_version="0.32.0"):
    """[(model, plan_model result, seconds)] for the three reference models on 8x RTX PRO 6000 over PCIe."""
    results = []
    for stem in REFERENCE_MODELS:
        model = load(stem)
        started = time.perf_counter()
        result = plan_model(model, 8, None, vllm_version, max_model_len=32768,
                            gpu_name=GPU_NAMES["RTX PRO 6000"], link="pcie", objective=objective,
                            workload=REFERENCE_WORKLOAD)
        results.append((stem, result, time.perf_counter() - started))
    return results


# The serving sweeps of tests/unit/fixtures/perf/h100-serve-0.24.json (BF16: Llama-3.1-8B, Qwen3-30B-A3B),
# h100-serve-fp8-0.24.json (FP8: Qwen3-30B-A3B-FP8, block-scaled; Llama-3.1-8B quantized at load),
# h100-serve-pair-0.24.json (the BF16 two again, a third lease and host) and h100-serve-sync-0.24.json /
# h100-serve-pair-sync-0.24.json (--no-async-scheduling; the second on the pair's host), h100-serve-70b-fp8-0.24.json
# (nvidia's ModelOpt FP8 Llama-3.1-70B at 0.97 of the memory, a fourth lease): vLLM 0.24.0 with its serving
# defaults (but for that flag) on one H100 (recorded by record_h200_serve.py), its workload as vllm_bench ran it.
SERVE_GPU = "NVIDIA H100 80GB HBM3"
SERVE_RECORDINGS = ("h100-serve-0.24.json", "h100-serve-fp8-0.24.json", "h100-serve-pair-0.24.json",
                    "h100-serve-70b-fp8-0.24.json")
# An experiment, not validation of a default server: the same sweep with --no-async-scheduling (issue 32's question
# whether async scheduling's lag explains the open loop's TTFT). Printed beside the default servers, left out of the
# error bands, which describe servers as vLLM runs them by default.
EXPERIMENT_RECORDINGS = ("h100-serve-sync-0.24.json", "h100-serve-pair-sync-0.24.json")
# Engine steps of the same models (record_h100_steps.py): fit data, with the serving recording of each model.
STEP_RECORDINGS = ("h100-steps-0.24.json", "h100-steps-fp8-0.24.json")
SERVE_METRICS = (("ttft_ms", "median", "ttft_ms"), ("ttft_ms", "p99", "ttft_p99_ms"), ("tpot_ms", "median", "tpot_ms"),
                 ("output_tokens_per_s", None, "output_tokens_per_s"))
SERVE_RATE_METRICS = (("ttft_ms", "median"), ("ttft_ms", "p99"), ("tpot_ms", "median"), ("tpot_ms", "p99"))


def h100_steps():
    """Engine steps on one H100 (tests/unit/fixtures/perf/h100-steps-0.24.json; fit data: EAGER_KERNEL_US and the
    launch counts come from them): a prompt of L tokens alone and beside 4 decoding streams, with vLLM's default
    graphs (captured up to 512 tokens), against StepModel.mixed_step_s. The models' configs are the serving
    recording's."""
    configs, served = _merged(STEP_RECORDINGS, "configs"), _merged(SERVE_RECORDINGS, "models")
    rows = []
    for name in sorted(set(configs) & set(served)):
        step = recorded_step_model(name, served_entry(served[name]), SERVE_GPU)
        config = configs[name]
        for case, decodes in (("lone", 0), ("mixed", 4)):
            for length, measured in sorted(config["%s_step_ms" % case].items(), key=lambda item: int(item[0])):
                tokens = int(length)
                predicted = step.mixed_step_s(decodes, 300 if decodes else 0, tokens, tokens / 2.0, 1) * 1e3
                rows.append({"model": name, "case": case, "prompt_len": tokens, "measured_ms": measured,
                             "predicted_ms": round(predicted, 2),
                             "error_pct": round((predicted - measured) / measured * 100.0, 1)})
    return rows


def h100_gpu_steps():
    """Prompt steps with CUDA graphs captured up to 4096 tokens (the ``*_graphs_to_4096`` configs of the H100 step
    recordings), so that the GPU's work, not the CPU's launches, sets their time, against the model's GPU time of
    the same step (StepModel._chunk_alone_gpu_s): the fit data of MOE_GEMM_SHARE's fp8 figure (1024-3072 tokens of
    Qwen3-30B-A3B-FP8) and the check of its bf16 one, fitted on the H200."""
    configs, served = _merged(STEP_RECORDINGS, "configs"), _merged(SERVE_RECORDINGS, "models")
    rows = []
    suffix = "_graphs_to_4096"
    for label in sorted(label for label in configs if label.endswith(suffix) and label[:-len(suffix)] in served):
        name = label[:-len(suffix)]
        step = recorded_step_model(name, served_entry(served[name]), SERVE_GPU)
        for length, measured in sorted(configs[label]["lone_step_ms"].items(), key=lambda item: int(item[0])):
            tokens = int(length)
            predicted = step._chunk_alone_gpu_s(tokens, tokens / 2.0, 1, 1) * 1e3  # pylint: disable=protected-access
            rows.append({"model": name, "prompt_len": tokens, "measured_ms": measured,
                         "predicted_ms": round(predicted, 2),
                         "error_pct": round((predicted - measured) / measured * 100.0, 1)})
    return rows


DENSE_GEMM_SHAPES = ("llama70b_gate_up", "llama70b_down", "llama8b_qkv")


def h100_gemms():
    """Back-to-back GEMMs of dense models' shapes on one H100 (h100-micro.json, record_h200_micro.py; left out of the
    fit of vllm_hardware.HOPPER_BF16_GEMM, which used the H200's and the H100's prompt kernels), M from 128 to 16384:
    the measured time against the roofline along the device's curve (``dense``) and along the flat law."""
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning import vllm_hardware
    recording = _recording("h100-micro.json")
    if recording is None:
        return []
    spec = vllm_hardware.gpu_spec(SERVE_GPU)[1]
    rows = []
    for gemm in recording["gemm"]:
        if gemm["shape"] not in DENSE_GEMM_SHAPES or gemm["M"] < 128 or "tflops" not in gemm:
            continue
        family = "bf16" if gemm["dtype"] == "bf16" else "fp8"
        measured_ms = gemm["per_call_median_ms"]
        nbytes, flops = {family: float(gemm["bytes"])}, {family: gemm["flops"]}
        curve_ms = vllm_perf.roofline_s(nbytes, flops, spec, gemm["M"], dense=True) * 1e3
        flat_ms = vllm_perf.roofline_s(nbytes, flops, spec, gemm["M"]) * 1e3
        rows.append({"shape": gemm["shape"], "family": family, "M": gemm["M"], "measured_ms": measured_ms,
                     "share_of_peak": round(gemm["tflops"] / vllm_perf.family_peak(spec, family) * 1e12, 3),
                     "error_pct": round((curve_ms - measured_ms) / measured_ms * 100.0, 1),
                     "flat_error_pct": round((flat_ms - measured_ms) / measured_ms * 100.0, 1)})
    return rows


KV_RECORDING = "h100-kv-0.24.json"


def h100_kv_steps():
    """Decode steps of Llama-3.1-8B on one H100 at 16 and 32 sequences and growing contexts (h100-kv-0.24.json, the
    fit data of KV_BANDWIDTH_SHARE), against StepModel.tpot_s, and per batch the KV read rate implied by each
    step's growth above the shortest context: the growth's KV bytes over its time, as a share of the peak."""
    recording = _recording(KV_RECORDING)
    if not recording:
        return []
    from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_memory import kv_bytes_per_token
    model = load_model_config_from_dict(recording["config"])
    step = recorded_step_model("llama3.1_8b", {"config": recording["config"]}, SERVE_GPU)
    per_token = kv_bytes_per_token(model, {"tp": 1, "pp": 1, "dp": 1, "ep": False})
    rows, shortest = [], {}
    for measured in sorted(recording["derived"]["steps"], key=lambda r: (r["B"], r["context"])):
        batch, context = measured["B"], measured["context"] + 41  # mid-way through the 48 decode steps timed
        row = {"B": batch, "context": context, "measured_ms": round(measured["step_ms"], 3),
               "predicted_ms": round(step.tpot_s(batch, context) * 1e3, 3)}
        row["error_pct"] = round((row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"] * 100.0, 1)
        base = shortest.setdefault(batch, row)
        if base is not row:
            added_bytes = per_token * batch * (context - base["context"])
            seconds = (row["measured_ms"] - base["measured_ms"]) * 1e-3
            row["kv_read_share_of_peak"] = round(added_bytes / seconds / (step.spec["memory_bandwidth_gbs"] * 1e9), 3)
        rows.append(row)
    return rows


def serve_recordings(calibrated=False, recordings=SERVE_RECORDINGS):
    """Closed- and open-loop levels of real vLLM serving, left out of every fit, against the planner's prediction for
    the same plan (TP1), workload and rates (the scheduler simulation): one row per level and figure.

    ``calibrated``: the prediction after one calibration sweep, as the deploy and the gauntlet make it: the closed
    loop's levels are fitted (gauntlet.vllm.vllm_calibration), and the open loop and the max sustainable rate,
    left out of that fit, are judged. Their rows carry ``calibration``."""
    rows = []
    for name, entry in sorted(_merged(recordings, "models").items()):
        rows.extend(_serve_model_rows(name, served_entry(entry), calibrated))
    return rows


def _merged(filenames, key):
    """The ``key`` dicts (models, configs) of the recordings present among ``filenames``, merged."""
    merged = {}
    for filename in filenames:
        merged.update((_recording(filename) or {}).get(key) or {})
    return merged


def served_entry(entry):
    """A serving recording's entry with the config the planner is given for what was served: a BF16 folder served
    with ``--quantization fp8`` is vLLM's online FP8 (per-tensor weights, dynamic activation scales), as a checkpoint
    whose config.json says ``quant_method: fp8`` without blocks."""
    args = entry.get("server_args") or []
    if "--quantization" not in args or "quantization_config" in entry["config"]:
        return entry
    quantization = {"quant_method": args[args.index("--quantization") + 1], "activation_scheme": "dynamic"}
    return dict(entry, config=dict(entry["config"], quantization_config=quantization))


def _serve_estimate(entry, calibration=None):
    options, sweep = entry["sweep_options"], entry["sweep"]
    model = load_model_config_from_dict(entry["config"], entry.get("hf_quant_config"))
    workload = {"input_len": options["input_len"], "output_len": options["output_len"],
                "concurrency": [level["concurrency"] for level in sweep["levels"]],
                "request_rate": [level["request_rate"] for level in sweep["rate_levels"]],
                "burstiness": options["burstiness"], "goodput": options["goodput"]}
    max_len = int(_server_arg(entry, "--max-model-len"))
    utilization = _server_arg(entry, "--gpu-memory-utilization")
    # A server run with --no-async-scheduling is planned as one: the device spec's async_scheduling off.
    device_spec = {"async_scheduling": False} if "--no-async-scheduling" in entry["server_args"] else None
    inputs = plan_model(model, 1, None, "0.24.0", max_model_len=max_len, gpu_name=SERVE_GPU, workload=workload,
                        calibration=calibration, device_spec=device_spec,
                        gpu_memory_utilization=float(utilization) if utilization else None)["inputs"]
    return model, evaluate_plan_for(model, {"tp": 1, "pp": 1, "dp": 1, "ep": False}, inputs)["estimate"]


def _server_arg(entry, flag):
    """The value the recorded server was given for ``flag``, or None."""
    args = entry["server_args"]
    return args[args.index(flag) + 1] if flag in args else None


def _serve_row(name, kind, loop, level, figure, measured, predicted):
    return {"model": name, "kind": kind, "loop": loop, "level": level, "figure": figure, "measured": measured,
            "predicted": predicted, "error_pct": round((predicted - measured) / measured * 100.0, 1)}


def _serve_model_rows(name, entry, calibrated=False):
    model, estimate = _serve_estimate(entry)
    calibration = None
    if calibrated:
        calibration = vllm_perf.calibration_from_levels(estimate, entry["sweep"]["levels"], source="closed loop")
        model, estimate = _serve_estimate(entry, calibration)
    kind = vllm_error_bands.model_kind(model)
    rows = []
    for measured, predicted in zip(entry["sweep"]["levels"], estimate["levels"]):
        for key, stat, predicted_key in SERVE_METRICS:
            rows.append(_serve_row(name, kind, "closed", "C=%d" % measured["concurrency"], key if stat is None else
                                   "%s %s" % (key, stat), measured[key] if stat is None else measured[key][stat],
                                   predicted[predicted_key]))
    predicted_by_rate = dict((str(level["request_rate"]), level) for level in estimate["rate_levels"])
    for measured in entry["sweep"]["rate_levels"]:
        predicted = predicted_by_rate.get(str(measured["request_rate"]))
        if predicted is None:
            continue
        for key, stat in SERVE_RATE_METRICS:
            rows.append(_serve_row(name, kind, "open", "%s req/s" % measured["request_rate"], "%s %s" % (key, stat),
                                   measured[key][stat], predicted[key][stat]))
    # Judged again from the levels: the recording's own figure came from the bench before it stopped counting a
    # burst (rate inf) that met the SLO beside finite rates that missed it.
    measured_rate = bench_traffic.max_sustainable(entry["sweep"]["rate_levels"], entry["sweep_options"]["goodput"])[0]
    rows.append(_serve_row(name, kind, "open", "within the SLO", "max sustainable rate", measured_rate,
                           estimate["max_sustainable_rate"]))
    for row in rows if calibration else []:
        row["calibration"] = calibration
    return rows


# gpt-oss-120b served on one H100 (record_h200_serve.py gpt_oss_120b; vLLM 0.24 chose its 'TRITON' MXFP4 MoE backend,
# OpenAI's matmul_ogs, the machine's image having triton_kernels). With dummy weights its router's logits are its
# bias (the normed hidden state times a weight of +-1e-3 is ~5e-5 against a bias of ~1e-3), so every token picks the
# same four experts: TPOT stayed at 4.6-6.3 ms from 1 to 16 clients, and at 16 the step was shorter than reading the
# ~51 experts independent tokens pick (24 GB, 7.2 ms at the H100's peak). A prompt routes alike too (its 1024 tokens
# read 4 experts a layer, not up to 128), so only one client's decode step stands for real serving: its token picks
# four experts whatever the weights. The recording is kept out of SERVE_RECORDINGS and the error bands.
GPT_OSS_RECORDING = "h100-serve-gpt-oss-0.24.json"


def gpt_oss_single_stream():
    """The single client's TPOT in the gpt-oss-120b recording (MXFP4 on Hopper: the family's one measured point)
    against the planner: rows as serve_recordings'; [] without the recording."""
    served = (_recording(GPT_OSS_RECORDING) or {}).get("models") or {}
    rows = []
    for name, entry in sorted(served.items()):
        rows.extend(row for row in _serve_model_rows(name, entry)
                    if row["level"] == "C=1" and row["figure"].startswith("tpot_ms"))
    return rows


# The figures of the validation data, by the band they measure (vllm_error_bands.FIGURES).
BAND_FIGURES = {"ttft_ms median": "ttft", "ttft_ms p99": "ttft", "tpot_ms median": "tpot", "tpot_ms p99": "tpot",
                "output_tokens_per_s": "throughput"}


def band_errors(serve_rows=None, wave_rows=None):
    """Every error of the validation data (left out of every fit), as (kind, figure, loop, error %): the H100
    serving sweeps' levels and the H200 waves (a wave's last first token is a TTFT; its end, a throughput).
    ``serve_rows`` and ``wave_rows``: serve_recordings() and h200_waves() when a caller has them already."""
    errors = []
    for row in serve_rows if serve_rows is not None else serve_recordings():
        figure = BAND_FIGURES.get(row["figure"])
        if figure:
            errors.append((row["kind"], figure, row["loop"], row["error_pct"]))
    for row in wave_rows if wave_rows is not None else h200_waves():
        if row["not_counted"]:
            continue
        if row["output_len"] == 1:
            errors.append((row["kind"], "ttft", "closed", row["simulated_error_pct"]))
        else:
            # A wave's end predicted early is a throughput predicted high: the error of measured / predicted time.
            error = (row["measured_ms"] / row["simulated_ms"] - 1.0) * 100.0
            errors.append((row["kind"], "throughput", "closed", round(error, 1)))
    return errors


def error_band_table():
    """vllm_error_bands.ERROR_BANDS recomputed from band_errors() (its unit test compares the two)."""
    return vllm_error_bands.bands_from_errors(band_errors())
