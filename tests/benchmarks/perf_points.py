# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Public measurements of vLLM serving speed, each with its source, for calibrating the step-time model.

``POINTS`` is a tuple of plain dicts, one per measured figure (a table of a source is split into one point per
row or cell kept). Every point names the hardware (``gpu`` as the source writes it, ``gpus``, ``link``), the model
(``model``: the stem of a file in ``tests/unit/fixtures/model_configs`` when the served checkpoint is that model or
has the same architecture and size, else the Hugging Face id), how it was served (``quantization``, ``tp``, ``pp``,
``dp``, ``ep``, ``vllm_version``), the load (``input_len``, ``output_len``, ``concurrency``: clients or batch size,
1 for a single stream) and the figure (``metric`` and ``value``):

* ``output_tokens_per_s``: output tokens per second of all streams together;
* ``user_tokens_per_s``: output tokens per second of one stream;
* ``tpot_ms`` / ``ttft_ms``: time per output token / to the first token, in milliseconds.

``quote`` is the text the figure was read from, at most 300 characters: a sentence, or a table's heading, header
row and data row as the source writes them, fragments joined by `` ... `` and runs of blanks collapsed to one;
``source_url`` / ``source_title`` / ``source_date`` say where; ``notes`` holds the caveats (speculative decoding,
benchmark tool, approximations, a range's midpoint). No figure is derived: a value is the number the source
prints, or the midpoint of the range it prints (said so in ``notes``).

How the points are used: ``vllm_perf.calibration_from_levels`` and the lead's calibration work compare the
model's estimate for a point's plan and load with ``value``; the benchmark ``tests/benchmarks/bench_perf_model.py``
reports the model's error on every point, by GPU and by metric. Points on ``RTX PRO 6000`` (PCIe, no NVLink) are the
reference box; the H100/H200 points calibrate the GPU-independent parts.

Nothing here is read at run time by a module; it is data for tests, benchmarks and documentation, so it lives
beside the benchmarks and does not ship in the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

METRICS = ("output_tokens_per_s", "user_tokens_per_s", "tpot_ms", "ttft_ms")

_RTX6K = "https://github.com/voipmonitor/rtx6kpro/blob/master/"
_QWEN35_TITLE = "rtx6kpro wiki: Inference Throughput: Qwen3.5-397B-A17B Quantizations (4x RTX PRO 6000, vLLM)"
_QWEN35_NOTES = ("vLLM server: --max-num-seqs 128 --max-num-batched-tokens 8192, prefix caching and chunked prefill on; "
                 "tool llm_decode_bench.py, 512 max tokens per request, context 0 (short prompt); MTP off; "
                 "decode tok/s as the tool reports it. Qwen3.5-397B-A17B is not a fixture model: 397B MoE, 17B active.")
_KIMI_TITLE = "rtx6kpro wiki: Kimi-K2.5 on 8x RTX PRO 6000"
_KIMI_NOTES_COMMON = ("native INT4 checkpoint (compressed-tensors W4A16, MoE on Marlin; VLLM_MARLIN_* env per the page); "
                      "Festr's patched vLLM nightly image voipmonitor/vllm-openai:cu130-nightly-patched; decode tok/s from "
                      "vLLM stats log; no speculative decoding.")
_MINIMAX_TITLE = "rtx6kpro wiki: MiniMax-M2.5 on RTX PRO 6000"
_IX832 = "https://github.com/SemiAnalysisAI/InferenceX/pull/832"
_IX832_TITLE = "SemiAnalysisAI/InferenceX PR #832: Add MiniMax-M2.5 FP8 vLLM benchmark for H100"
_IX832_NOTES = ("InferenceX single-node run, vllm bench serve style 1k input / 1k output, mean figure; vLLM image "
                "of the InferenceX config at the time (not stated in the PR). Same table gives tput per GPU.")


def _point(pid, src, fig, plan, load, notes):
    """One point from its parts: src=(url, title, date, quote), fig=(metric, value),
    plan=(gpu, gpus, link, model, quantization, tp, pp, dp, ep, vllm_version), load=(input_len, output_len, concurrency)."""
    url, title, date, quote = src
    gpu, gpus, link, model, quantization, tp, pp, dp, ep, version = plan
    input_len, output_len, concurrency = load
    metric, value = fig
    return {
        "id": pid, "source_url": url, "source_title": title, "source_date": date, "quote": quote,
        "gpu": gpu, "gpus": gpus, "link": link, "model": model, "quantization": quantization,
        "tp": tp, "pp": pp, "dp": dp, "ep": ep, "vllm_version": version,
        "input_len": input_len, "output_len": output_len, "concurrency": concurrency,
        "metric": metric, "value": value, "notes": notes,
    }


def _qwen35_points():
    url = _RTX6K + "benchmarks/inference-throughput/README.md"
    awq_row = "| AWQ | OFF | 104 | 509 | 843 | 1272 | 1909 | 2796 |"
    nv_row = "| nvidia NVFP4 | OFF | 79 | 406 | 652 | 987 | 1590 | 2294 |"
    head = "Decode throughput at context=0 (tok/s) ... | Model | MTP | C=1 | C=8 | C=16 | C=32 | C=64 | C=128 | ... "
    awq = ("RTX PRO 6000", 4, "pcie", "QuantTrio/Qwen3.5-397B-A17B-AWQ", "int4 awq w4a16", 4, 1, 1, False, "0.17.0rc1")
    nv = ("RTX PRO 6000", 4, "pcie", "nvidia/Qwen3.5-397B-A17B-NVFP4", "nvfp4", 4, 1, 1, False, "0.17.0rc1")
    points = []
    for conc, awq_v, nv_v in ((1, 104.0, 79.0), (32, 1272.0, 987.0), (128, 2796.0, 2294.0)):
        metric = "user_tokens_per_s" if conc == 1 else "output_tokens_per_s"
        points.append(_point("rtx6k-qwen35-397b-awq-tp4-c%d" % conc, (url, _QWEN35_TITLE, "2026-03-14", head + awq_row),
                             (metric, awq_v), awq, (None, 512, conc), _QWEN35_NOTES + " AWQ INT4 (Marlin W4A16 path)."))
        points.append(_point("rtx6k-qwen35-397b-nvfp4-tp4-c%d" % conc, (url, _QWEN35_TITLE, "2026-03-14", head + nv_row),
                             (metric, nv_v), nv, (None, 512, conc), _QWEN35_NOTES + " nvidia NVFP4 checkpoint."))
    ctx_url = _RTX6K + "benchmarks/inference-throughput/vllm-vs-sglang.md"
    ctx_row = ("vLLM MTP OFF (no-MTP) (tok/s) ... | ctx \\ conc | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128 | ... "
               "| 128k | 77 | 133 | 239 | 389 | 604 | 859 | 1209 | 1527 |")
    luke = ("RTX PRO 6000", 4, "pcie", "lukealonso/Qwen3.5-397B-A17B-NVFP4", "nvfp4", 4, 1, 1, False, "0.17.0rc1")
    title = "rtx6kpro wiki: vLLM vs SGLang Throughput: lukealonso/Qwen3.5-397B-A17B-NVFP4"
    ctx_notes = _QWEN35_NOTES.replace("context 0 (short prompt)", "context 128k per request (source says 128k)")
    points.append(_point("rtx6k-qwen35-397b-nvfp4-tp4-ctx128k-c1", (ctx_url, title, "2026-03-14", ctx_row),
                         ("user_tokens_per_s", 77.0), luke, (None, 512, 1), ctx_notes))
    points.append(_point("rtx6k-qwen35-397b-nvfp4-tp4-ctx128k-c64", (ctx_url, title, "2026-03-14", ctx_row),
                         ("output_tokens_per_s", 1209.0), luke, (None, 512, 64), ctx_notes))
    return points


def _kimi_points():
    url = _RTX6K + "models/kimi-k25.md"
    base = ("RTX PRO 6000", 8, "pcie", "moonshotai--Kimi-K2.5", "int4 w4a16", 8, 1, 1, False, None)
    fa2 = "| Festr Turin | vLLM, BF16 KV, FA2, DCP=1 | **90 tok/s** | -- | -- | Best single batch |"
    tri = "| `moonshotai/Kimi-K2.5` | INT4 Marlin (native) | FP8 | 79 (DCP=1) | ~449K tokens | 2.4x more context than BF16 |"
    p2p = "| Festr Turin | vLLM, FP8 KV, DCP=8, P2P | 65 tok/s | 36 tok/s | 27 tok/s | With NCCL graph |"
    nop2p = "| Festr Turin | vLLM, FP8 KV, DCP=8, no P2P | 44 tok/s | 29 tok/s | 23 tok/s | P2P disabled + channels |"
    genoa = "| orangezed | vLLM, FP8 KV, DCP=8 | 32-35 tok/s | 30-35 tok/s* | 19-20 tok/s | Genoa, 5-ch DIMM, 2x xGMI |"
    many = "High concurrency (100 concurrent requests, 40K context each) ... Festr: **900 tok/s total** with vLLM, FP8 KV, DCP=8, TP=8"
    n = _KIMI_NOTES_COMMON
    rows = (
        ("rtx6k-kimi-k25-tp8-bf16kv-fa2-c1", fa2, "user_tokens_per_s", 90.0, 1,
         n + " BF16 KV cache, FlashInfer FA2 MLA backend (vLLM PR #36322), DCP=1; dual EPYC Turin host, NCCL graph XML; 0K context."),
        ("rtx6k-kimi-k25-tp8-fp8kv-triton-c1", tri, "user_tokens_per_s", 79.0, 1,
         n + " FP8 KV cache, TRITON_MLA, DCP=1 (the attention-backend table gives 79 for TP8/DCP1/FP8 too); host not stated; 0K context."),
        ("rtx6k-kimi-k25-tp8-dcp8-p2p-c1", p2p, "user_tokens_per_s", 65.0, 1,
         n + " FP8 KV, DCP=8 (decode context parallel, not in the plan keys), P2P on, NCCL graph XML; 0K context."),
        ("rtx6k-kimi-k25-tp8-dcp8-p2p-ctx100k-c1", p2p, "user_tokens_per_s", 36.0, 1,
         n + " FP8 KV, DCP=8, P2P on; 100K context (source: '100K Context' column)."),
        ("rtx6k-kimi-k25-tp8-dcp8-nop2p-c1", nop2p, "user_tokens_per_s", 44.0, 1,
         n + " FP8 KV, DCP=8, NCCL_P2P_DISABLE=1 (all-reduce through host memory): the PCIe-latency penalty vs 65 with P2P."),
        ("rtx6k-kimi-k25-tp8-dcp8-genoa-c1", genoa, "user_tokens_per_s", 33.5, 1,
         n + " FP8 KV, DCP=8 on a Genoa host (5-channel DIMM, 2x xGMI); source range 32-35 tok/s, value is the midpoint."),
        ("rtx6k-kimi-k25-tp8-dcp8-c100-ctx40k", many, "output_tokens_per_s", 900.0, 100,
         n + " FP8 KV, DCP=8; 100 concurrent requests at 40K context each (input_len not given as a number)."),
    )
    return [_point(pid, (url, _KIMI_TITLE, "2026-03-31", quote), (metric, value), base, (None, None, conc), notes)
            for pid, quote, metric, value, conc, notes in rows]


def _minimax_points():
    url = _RTX6K + "models/minimax-m25.md"
    nv = ("RTX PRO 6000", 2, "pcie", "nvidia--MiniMax-M2.5-NVFP4", "nvfp4", 2, 1, 1, False, None)
    awq = ("RTX PRO 6000", 2, "pcie", "MiniMaxAI--MiniMax-M2.5", "int4 awq w4a16", 2, 1, 1, False, None)
    awq_notes = ("checkpoint mratsim/Minimax-M2.5-BF16-INT4-AWQ (same architecture as the fixture, AWQ INT4 weights); "
                 "vLLM TP2 with --max-num-seqs 64, FlashInfer attention, prefix caching; Marky's run; no spec decoding.")
    conc_quote = ("Marky's AWQ benchmark (2× GPUs, vLLM, 64 concurrent): ... Output token throughput (tok/s): 930.12 ... "
                  "Mean TTFT (ms): 339.69 ... Mean TPOT (ms): 56.32")
    rows = (
        ("rtx6k-minimax-m25-nvfp4-tp2-c1", "| NVFP4, 2× GPUs | vLLM | ~85 | Festr, TP2 |", nv, "user_tokens_per_s", 85.0, 1,
         "checkpoint lukealonso/MiniMax-M2.5-NVFP4 (fixture nvidia--MiniMax-M2.5-NVFP4 is the same architecture; which "
         "layers stay BF16 may differ); FlashInfer CUTLASS NVFP4 GEMM/MoE, FP8 KV; source says ~85 (approximate)."),
        ("rtx6k-minimax-m25-awq-tp2-c1", "| AWQ, 2× GPUs | vLLM | ~114 (low ctx) | Marky |", awq, "user_tokens_per_s",
         114.0, 1, awq_notes + " Source says ~114 at low context (approximate)."),
        ("rtx6k-minimax-m25-awq-tp2-c64-out", conc_quote, awq, "output_tokens_per_s", 930.12, 64, awq_notes),
        ("rtx6k-minimax-m25-awq-tp2-c64-tpot", conc_quote, awq, "tpot_ms", 56.32, 64, awq_notes),
        ("rtx6k-minimax-m25-awq-tp2-c64-ttft", conc_quote, awq, "ttft_ms", 339.69, 64, awq_notes),
    )
    return [_point(pid, (url, _MINIMAX_TITLE, "2026-04-13", quote), (metric, value), plan, (None, None, conc), notes)
            for pid, quote, plan, metric, value, conc, notes in rows]


def _hopper_points():
    tp4 = ("H100", 4, "nvlink", "MiniMaxAI--MiniMax-M2.5", "fp8 block", 4, 1, 1, True, None)
    tp8 = ("H100", 8, "nvlink", "MiniMaxAI--MiniMax-M2.5", "fp8 block", 8, 1, 1, True, None)
    head = "Results (1k1k, conc=4, TP=4/EP=4) ... | Metric | TP=8/EP=8 | TP=4/EP=4 | Delta | ... "
    tpot = head + "| Mean TPOT | 8.96 ms | 13.34 ms | +48.9% |"
    ttft = head + "| Mean TTFT | 83.9 ms | 129.8 ms | +54.7% |"
    load = (1024, 1024, 4)
    points = [
        _point("h100-minimax-m25-fp8-tp4ep4-c4-tpot", (_IX832, _IX832_TITLE, "2026-03-02", tpot), ("tpot_ms", 13.34), tp4,
               load, _IX832_NOTES),
        _point("h100-minimax-m25-fp8-tp4ep4-c4-ttft", (_IX832, _IX832_TITLE, "2026-03-02", ttft), ("ttft_ms", 129.8), tp4,
               load, _IX832_NOTES),
        _point("h100-minimax-m25-fp8-tp8ep8-c4-tpot", (_IX832, _IX832_TITLE, "2026-03-02", tpot), ("tpot_ms", 8.96), tp8,
               load, _IX832_NOTES),
        _point("h100-minimax-m25-fp8-tp8ep8-c4-ttft", (_IX832, _IX832_TITLE, "2026-03-02", ttft), ("ttft_ms", 83.9), tp8,
               load, _IX832_NOTES),
    ]
    kimi_url = "https://github.com/vllm-project/recipes/blob/main/moonshotai/Kimi-K2-Think.md"
    kimi_quote = ("We used the following script to benchmark `moonshotai/Kimi-K2-Thinking` on 8*H200. ... TP8 Benchmark "
                  "Output ... Output token throughput (tok/s): 485.78 ... Peak concurrent requests: 988.00")
    kimi = ("H200", 8, "nvlink", "moonshotai--Kimi-K2.5", "int4 w4a16", 8, 1, 1, False, None)
    kimi_source = (kimi_url, "vLLM recipes: moonshotai/Kimi-K2-Thinking", "2025-11-07", kimi_quote)
    points.append(_point("h200-kimi-k2-thinking-int4-tp8-rr100", kimi_source,
                         ("output_tokens_per_s", 485.78), kimi, (8000, 4000, 988),
                         "request-rate 100 with 1000 prompts, not a fixed client count: concurrency is the source's peak "
                         "concurrent requests (988); KV-cache bound (mean TTFT 271 s), prefill-heavy. 2 of 1000 failed. "
                         "bench: --random-input 8000 --random-output 4000. vLLM nightly of 2025-11. Model is moonshotai/Kimi-K2-Thinking: "
                         "fixture moonshotai--Kimi-K2.5 has the same text architecture and INT4 W4A16 scheme (the "
                         "Kimi-K2-Thinking.ABRIDGED fixture lacks its quantization_config)."))
    return points


POINTS = tuple(_qwen35_points() + _kimi_points() + _minimax_points() + _hopper_points())
