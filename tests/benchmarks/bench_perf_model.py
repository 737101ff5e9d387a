# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print the performance model's prediction against every public measurement in perf_points.py
(and the H200 recordings in tests/unit/fixtures/perf/ when present), the median and worst error per group,
the reference box's plan ranking, and how long planning an 8-GPU box for a 1T-parameter model takes.

Figures to read, not a pass/fail test: the goal (within +-30 % of measurements, same ranking) is
printed beside each figure, never asserted."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from perf_points_eval import (  # noqa: E402  pylint: disable=wrong-import-position
    EXPERIMENT_RECORDINGS, band_errors, evaluate_points, gpt_oss_single_stream, h100_gemms, h100_gpu_steps, h100_kv_steps,
    h100_steps, h200_recordings, h200_waves, reference_box, serve_recordings)
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_error_bands import bands_from_errors  # noqa: E402  pylint: disable=wrong-import-position


def _error_line(label, errors):
    if not errors:
        return "%-34s no points" % label
    ordered = sorted(errors, key=abs)
    median = sorted(errors)[len(errors) // 2]
    worst = ordered[-1]
    within = sum(1 for e in errors if abs(e) <= 30.0)
    return "%-34s n=%-3d median %+6.1f %%  worst %+7.1f %%  within 30 %%: %d/%d" % (
        label, len(errors), median, worst, within, len(errors))


def print_points():
    rows, skipped = evaluate_points()
    print("Public points (tests/benchmarks/perf_points.py): predicted against measured")
    print("%-42s %-16s %-8s %5s %-19s %10s %10s %8s" % (
        "id", "gpu", "plan", "C", "metric", "measured", "predicted", "error"))
    for row in rows:
        print("%-42s %-16s %-8s %5d %-19s %10.1f %10.1f %+7.1f%%" % (
            row["id"][:42], "%s x%d" % (row["gpu"], row["gpus"]), row["plan"], row["concurrency"], row["metric"],
            row["measured"], row["predicted"], row["error_pct"]))
    for point_id, why in skipped:
        print("%-42s skipped: %s" % (point_id[:42], why))
    print()
    print(_error_line("all points", [r["error_pct"] for r in rows]))
    for gpu in sorted(set(r["gpu"] for r in rows)):
        print(_error_line("  on %s" % gpu, [r["error_pct"] for r in rows if r["gpu"] == gpu]))
    for metric in sorted(set(r["metric"] for r in rows)):
        print(_error_line("  %s" % metric, [r["error_pct"] for r in rows if r["metric"] == metric]))
    print()


def print_h200():
    rows = h200_recordings()
    if not rows:
        print("H200 recordings: none in tests/unit/fixtures/perf/")
        return
    print("H200, real vLLM 0.24 with dummy weights (tests/unit/fixtures/perf/): decode step ms, predicted against measured")
    for row in rows:
        print("%-34s B=%-4d measured %8.2f ms  predicted %8.2f ms  error %+6.1f %%%s" % (
            row["model"][:34], row["batch"], row["measured_ms"], row["predicted_ms"], row["error_pct"],
            "  (not counted: %s)" % row["not_counted"] if row["not_counted"] else ""))
    print(_error_line("H200 decode steps", [r["error_pct"] for r in rows if not r["not_counted"]]))
    print()


def print_h100_steps():
    rows = h100_steps()
    if not rows:
        print("H100 steps: no recording in tests/unit/fixtures/perf/")
        return
    print("H100 engine steps, real vLLM 0.24 (fit data of the launch floor): a prompt alone and beside 4 decoding "
          "streams, graphs captured up to 512 tokens")
    for row in rows:
        print("%-22s %-5s prompt %5d  measured %7.1f ms  predicted %7.1f ms  %+7.1f %%" % (
            row["model"], row["case"], row["prompt_len"], row["measured_ms"], row["predicted_ms"], row["error_pct"]))
    print(_error_line("H100 steps", [row["error_pct"] for row in rows]))
    print()


def print_h100_gpu_steps():
    rows = h100_gpu_steps()
    if not rows:
        return
    print("H100 prompt steps with graphs captured to 4096 tokens (the GPU sets the time; fit data of "
          "MOE_GEMM_SHARE fp8 at 1024-3072 tokens): measured against the model's GPU time")
    for row in rows:
        print("%-22s prompt %5d  measured %7.1f ms  predicted %7.1f ms  %+7.1f %%" % (
            row["model"], row["prompt_len"], row["measured_ms"], row["predicted_ms"], row["error_pct"]))
    print(_error_line("H100 GPU steps", [row["error_pct"] for row in rows]))
    print()


def print_h100_gemms():
    rows = h100_gemms()
    if not rows:
        return
    print("H100 GEMMs back to back, dense models' shapes (h100-micro.json; left out of the fit of the Hopper BF16 curve): "
          "the roofline along the device's curve (FP8: the flat law) and along the flat law, against the measured time")
    for row in rows:
        print("%-18s %-4s M=%5d  %.2f of the peak  model %+6.1f %%  flat law %+6.1f %%" % (
            row["shape"], row["family"], row["M"], row["share_of_peak"], row["error_pct"], row["flat_error_pct"]))
    for family in ("bf16", "fp8"):
        chosen = [row for row in rows if row["family"] == family]
        for label, key in (("model", "error_pct"), ("flat law", "flat_error_pct")):
            errors = [row[key] for row in chosen]
            mean = sum(abs(e) for e in errors) / len(errors)
            print("%s  mean |error| %.1f %%" % (_error_line("H100 GEMMs %s, %s" % (family, label), errors), mean))
    print()


def print_h100_kv_steps():
    rows = h100_kv_steps()
    if not rows:
        return
    print("H100 decode steps at growing contexts (Llama-3.1-8B, BF16 KV; fit data of KV_BANDWIDTH_SHARE): measured "
          "against the model, and the KV read rate each step's growth above the shortest context implies")
    for row in rows:
        share = row.get("kv_read_share_of_peak")
        print("B %2d  context %5d  measured %6.2f ms  predicted %6.2f ms  %+6.1f %%%s" % (
            row["B"], row["context"], row["measured_ms"], row["predicted_ms"], row["error_pct"],
            "  KV read at %.0f %% of the peak" % (share * 100) if share else ""))
    print(_error_line("H100 KV decode steps", [row["error_pct"] for row in rows]))
    print()


def print_h200_waves(rows):
    if not rows:
        print("H200 waves: no recording in tests/unit/fixtures/perf/")
        return
    print("H200 waves, real vLLM 0.24 (left out of the fit): B prompts at once; out=1 is the wave's last first token "
          "(TTFT p100), longer outputs its end")
    for row in rows:
        closed = ("closed form %8.1f ms %+7.1f %%" % (row["closed_form_ms"], row["closed_form_error_pct"])
                  if row["closed_form_ms"] is not None else "")
        print("%-20s B=%-4d in=%-5d out=%-3d measured %8.1f ms  simulated %8.1f ms %+7.1f %%  %s%s" % (
            row["model"][:20], row["batch"], row["input_len"], row["output_len"], row["measured_ms"],
            row["simulated_ms"], row["simulated_error_pct"], closed,
            "  (not counted: dummy weights route every token alike)" if row["not_counted"] else ""))
    counted = [row for row in rows if not row["not_counted"]]
    first = [row for row in counted if row["output_len"] == 1]
    print(_error_line("waves, TTFT p100, simulated", [r["simulated_error_pct"] for r in first]))
    print(_error_line("waves, TTFT p100, closed form", [r["closed_form_error_pct"] for r in first]))
    ends = [r["simulated_error_pct"] for r in counted if r["output_len"] > 1]
    print(_error_line("waves, end (out 17, 65), simulated", ends))
    print("goal (issue 32): TTFT median |error| <= 25 %, >= 80 % of points within 30 %")
    print()


def print_serve(rows):
    if not rows:
        print("H100 serving: no recording in tests/unit/fixtures/perf/")
        return
    print("H100 serving, real vLLM 0.24 with dummy weights (left out of every fit): vllm_bench's closed and open loop "
          "against the planner's simulation of the same workload (1024 in / 128 out)")
    for row in rows:
        print("%-22s %-6s %-16s %-20s measured %9.1f  predicted %9.1f  %+7.1f %%" % (
            row["model"], row["loop"], row["level"], row["figure"], row["measured"], row["predicted"], row["error_pct"]))
    for loop in ("closed", "open"):
        for figure in ("ttft_ms", "tpot_ms"):
            print(_error_line("%s loop, %s (p50 and p99)" % (loop, figure),
                              [r["error_pct"] for r in rows if r["loop"] == loop and r["figure"].startswith(figure)]))
    for name in sorted(set(row["model"] for row in rows)):
        for figure in ("ttft_ms", "tpot_ms"):
            print(_error_line("%s, %s (both loops)" % (name, figure),
                              [r["error_pct"] for r in rows if r["model"] == name and r["figure"].startswith(figure)]))
    print("goal (issue 32): TTFT median |error| <= 25 %, TPOT median |error| <= 15 %, >= 80 % of points within 30 %")
    print()


def print_gpt_oss():
    rows = gpt_oss_single_stream()
    if not rows:
        return
    print("MXFP4 on Hopper: gpt-oss-120b on one H100, vLLM 0.24's TRITON (matmul_ogs) MoE backend, one client "
          "decode (prompts and batched levels not counted: with dummy weights the router's bias routes every token to the "
          "same experts)")
    for row in rows:
        print("%-22s %-6s %-16s %-20s measured %9.1f  predicted %9.1f  %+7.1f %%" % (
            row["model"], row["loop"], row["level"], row["figure"], row["measured"], row["predicted"], row["error_pct"]))
    print()


def print_async_experiment(default_rows, sync_rows):
    """The open loop with and without async scheduling, measured and predicted, model by model and level by level."""
    if not sync_rows:
        return
    print("H100 serving, the same sweep with --no-async-scheduling (an experiment, left out of the bands): open-loop "
          "TTFT and TPOT p50, async (vLLM's default) against sync, measured and predicted; qwen3_30b_a3b_pair's two "
          "servers shared one lease and host, the others' async and sync servers came from two leases")
    default = dict(((r["model"], r["level"], r["figure"]), r) for r in default_rows if r["loop"] == "open")
    for row in sync_rows:
        if row["loop"] != "open" or not row["figure"].endswith("median"):
            continue
        base = default.get((row["model"][:-len("_sync")], row["level"], row["figure"]))
        if base is None:
            continue
        values = (row["model"][:-len("_sync")], row["level"], row["figure"], base["measured"], base["predicted"],
                  base["error_pct"], row["measured"], row["predicted"], row["error_pct"])
        print("%-22s %-16s %-16s async measured %8.1f predicted %8.1f (%+6.1f %%)   sync measured %8.1f predicted "
              "%8.1f (%+6.1f %%)" % values)
    print()


def print_bands(errors):
    print("Error bands (vllm_error_bands.ERROR_BANDS): %d validation errors, left out of every fit; pct is the 80th "
          "percentile of |error|" % len(errors))
    for key, row in sorted(bands_from_errors(errors).items()):
        print("  %-26s +-%5.1f %%   median %+6.1f %%   %3d points" % (key, row["pct"], row["median_pct"], row["points"]))
    print()


def print_reference_box():
    # 0.28.0 is the release the reference team ran (TP8 of MiniMax-M2.5 crashed on its FP8 block size);
    # from 0.29.0 vLLM refines the block and more plans load.
    for version in ("0.28.0", "0.32.0"):
        for objective in ("throughput", "latency"):
            print("Reference box (8x RTX PRO 6000 Blackwell, PCIe), vLLM %s, input 1000 / output 1000 tokens, "
                  "objective %s" % (version, objective))
            for name, result, seconds in reference_box(objective, version):
                print("%-28s %s (planned in %.3f s)" % (name, result["why"], seconds))
                for plan_name in result["ranking"][:4]:
                    plan = [p for p in result["plans"] if p["name"] == plan_name][0]
                    print("    %-14s C=1 %6.1f tok/s   peak %8.1f tok/s at C=%s" % (
                        plan_name, plan["estimate"]["decode_tokens_per_s"],
                        plan["estimate"]["peak_output_tokens_per_s"] or 0, plan["estimate"]["saturation_concurrency"]))
            print()
    print("goal: all plans of an 8-GPU host for a 1T-parameter model, 6 concurrency levels, under 0.5 s (times above)")


def print_serve_calibrated(rows):
    """The open loop and the max sustainable rate after one calibration sweep (the closed loop's levels)."""
    if not rows:
        return
    print("H100 serving after one calibration sweep: the closed loop's levels fitted (vllm_calibration), the open "
          "loop left out of the fit and judged")
    for name in sorted(set(row["model"] for row in rows)):
        calibration = [row for row in rows if row["model"] == name][0]["calibration"]
        print("%-22s ratios %s, extra request overhead %.1f ms" % (
            name, ", ".join("%s %.2f" % item for item in sorted(calibration["ratios"].items())),
            calibration["extra_request_overhead_ms"]))
    for row in rows:
        if row["loop"] == "open":
            print("%-22s %-16s %-20s measured %9.1f  calibrated %9.1f  %+7.1f %%" % (
                row["model"], row["level"], row["figure"], row["measured"], row["predicted"], row["error_pct"]))
    for figure in ("ttft_ms", "tpot_ms"):
        print(_error_line("calibrated, open loop, %s" % figure,
                          [r["error_pct"] for r in rows if r["loop"] == "open" and r["figure"].startswith(figure)]))
    print()


# The rig's open loops (scripts/rig_rate_eval.py --json): tiny-llama and tiny-qwen3-moe, several repeats each; first
# the server and the bench client on cores of their own (the goal's recordings), then two on shared cores, where the
# starved client's delays read as the server's (docs/perf-model.md section 5).
RIG_RATE_RECORDINGS = ("rig-rate-vllm-cpu-pinned.json", "rig-rate-vllm-cpu-moe-pinned.json",
                       "rig-rate-vllm-cpu-pinned-2.json", "rig-rate-vllm-cpu-moe-pinned-2.json",
                       "rig-rate-vllm-cpu.json", "rig-rate-vllm-cpu-moe-ttft.json")


def print_rig_rate():
    """The rig's own open loops (RIG_RATE_RECORDINGS) predicted before and after one calibration sweep each, by
    scripts/rig_rate_eval.py; it needs the rig's tiny models (scripts/rig.sh), else says so."""
    root = os.path.join(HERE, "..", "..")
    print("The rig (issue 32's rig goal: the max sustainable rate within +-25 % after one calibration sweep):")
    for name in RIG_RATE_RECORDINGS:
        recording = os.path.join(root, "tests", "unit", "fixtures", "perf", name)
        proc = subprocess.run([sys.executable, os.path.join(root, "scripts", "rig_rate_eval.py"), "--summary",
                               "--from-json", recording], capture_output=True, text=True, check=False, timeout=300)
        print(proc.stdout if proc.returncode == 0 else "%s not printed: %s" % (
            name, proc.stderr.strip().splitlines()[-1:]))
    print()


def main():
    print_points()
    print_h200()
    print_h100_steps()
    print_h100_gpu_steps()
    print_h100_gemms()
    print_h100_kv_steps()
    # Each simulated once: the bands are the errors of the same rows the two tables print.
    waves, serving = h200_waves(), serve_recordings()
    print_h200_waves(waves)
    print_serve(serving)
    print_serve_calibrated(serve_recordings(calibrated=True))
    print_async_experiment(serving, serve_recordings(recordings=EXPERIMENT_RECORDINGS))
    print_gpt_oss()
    print_bands(band_errors(serving, waves))
    print_rig_rate()
    print_reference_box()


if __name__ == "__main__":
    main()
