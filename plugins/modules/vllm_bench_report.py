#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_bench_report
short_description: Write a vllm_bench sweep as JSON, a Markdown table and a PNG plot, and add it to a history
version_added: 0.1.0
description:
  - Takes the result of M(gauntlet.vllm.vllm_bench) and writes, under O(output_dir), C(<name>.json) (the whole result),
    C(<name>.md) (a table per concurrency level, and the change per level against O(baseline) when given) and
    C(<name>.png) (output tok/s and p99 TTFT against concurrency, the baseline dashed).
  - Appends one line per run to O(history_file) (JSON lines), so runs of many days can be compared.
  - Meant to run on the controller (delegated to C(localhost)), where the report is read; the PNG needs matplotlib
    there.
  - Existing files of an earlier run of the same O(name) are replaced, never the history.
  - The files are written mode 0640 and carry the marker C(gauntlet.vllm.vllm_bench_report) (a C(generator) key in
    the JSON and on each history line, a first-line comment in the Markdown, the PNG's C(Software) text). A file
    already at one of the paths without that marker was written by something else; the module fails naming it
    and leaves it alone.
  - O(baseline) is read only up to 64 MiB and must be a JSON report of this module (with a C(levels) list).
author:
  - gauntlet.vllm contributors (@gauntlet)
requirements:
  - matplotlib (for the PNG)
options:
  result:
    description: The registered result of M(gauntlet.vllm.vllm_bench) (or its C(ansible_facts.vllm_bench)).
    type: dict
    required: true
  name:
    description: Name of this run, used in file names and titles (for example C(kimi-k25-int4-tp8)).
    type: str
    required: true
  output_dir:
    description: Directory for the report files; created when missing.
    type: path
    required: true
  history_file:
    description: JSON-lines file each run is appended to; default C(history.jsonl) in O(output_dir).
    type: path
  baseline:
    description: A JSON file an earlier run wrote, to compare with level by level.
    type: path
  plot:
    description: Write the PNG.
    type: bool
    default: true
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    details: In check mode it computes the comparison and the table and writes nothing; C(changed) is true as in a
      real run, which always appends a history line.
seealso:
  - module: gauntlet.vllm.vllm_bench
"""

EXAMPLES = r"""
- name: Write the report on the controller, compared with yesterday's run
  gauntlet.vllm.vllm_bench_report:
    result: "{{ kimi_bench }}"
    name: kimi-k25-int4-tp8
    output_dir: "{{ playbook_dir }}/reports"
    baseline: "{{ playbook_dir }}/reports/kimi-k25-int4-tp8-baseline.json"
  delegate_to: localhost
"""

RETURN = r"""
files:
  description: The files written (C(json), C(markdown), C(png), C(history)); paths are set also in check mode.
  returned: always
  type: dict
markdown:
  description: The Markdown report.
  returned: always
  type: str
comparison:
  description: Per concurrency level present in both runs, each compared figure with the baseline's and the change in %.
  returned: when O(baseline) is given
  type: list
  elements: dict
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gauntlet.vllm.plugins.module_utils import vllm_bench as bench
from ansible_collections.gauntlet.vllm.plugins.module_utils import report_files
from ansible_collections.gauntlet.vllm.plugins.module_utils.model_config import parse_json, read_text

MARKER = report_files.marker_of("vllm_bench_report")
BASELINE_MAX_BYTES = 64 * 1024 * 1024

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None


def comparison_table(rows):
    lines = ["", "### Against the baseline", "",
             "| C | " + " | ".join(label for dummy, label in bench.COMPARED) + " |",
             "|---:|" + "---:|" * len(bench.COMPARED)]
    for row in rows:
        cells = []
        for key, dummy in bench.COMPARED:
            item = row[key]
            change = "" if item["change_pct"] is None else " (%+.1f%%)" % item["change_pct"]
            cells.append("%s%s" % ("-" if item["value"] is None else "%.1f" % item["value"], change))
        lines.append("| %d | %s |" % (row["concurrency"], " | ".join(cells)))
    return "\n".join(lines) + "\n"


def render_markdown(name, result, rows):
    workload = result.get("workload") or {}
    head = ["## %s" % name, "",
            "%s via %s, %s tokens in, %s out%s, seed %s." % (
                workload.get("model"), workload.get("api"), workload.get("input_len"), workload.get("output_len"),
                " (ignore_eos)" if workload.get("ignore_eos") else "", workload.get("seed")),
            "Peak %.1f output tok/s at C=%s; saturation at C=%s." % (
                result.get("peak_output_tokens_per_s") or 0.0, result.get("peak_concurrency"),
                result.get("saturation_concurrency")), ""]
    if result.get("aborted"):
        head += ["**Sweep stopped early:** %s" % result["aborted"], ""]
    text = "\n".join(head) + bench.markdown_table(result.get("levels") or [])
    if rows is not None:
        text += comparison_table(rows)
    return text


def render_png(path, name, levels, baseline_levels):
    figure, (throughput, ttft) = plt.subplots(1, 2, figsize=(11, 4.2))
    for data, style, label in ((levels, "-o", name), (baseline_levels or [], "--s", "baseline")):
        if not data:
            continue
        xs = [level["concurrency"] for level in data]
        throughput.plot(xs, [level["output_tokens_per_s"] for level in data], style, label=label)
        ttft.plot(xs, [level["ttft_ms"]["p99"] for level in data], style, label=label)
    for axis, title, unit in ((throughput, "Output throughput", "tok/s"), (ttft, "p99 TTFT", "ms")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrency")
        axis.set_ylabel(unit)
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.suptitle(name)
    figure.tight_layout()
    figure.savefig(path, dpi=110, metadata={"Software": MARKER})
    plt.close(figure)


def read_baseline(path):
    """The levels of a baseline report, or raise ValueError naming the file and what is wrong."""
    baseline = parse_json(read_text(path, ValueError, BASELINE_MAX_BYTES), path, ValueError)
    levels = baseline.get("levels") if isinstance(baseline, dict) else None
    if not isinstance(levels, list) or not all(isinstance(level, dict) for level in levels):
        raise ValueError("%s: it is not a vllm_bench JSON report (no 'levels' list of objects)" % path)
    return levels


def history_line(name, recorded_at, result):
    return json.dumps({
        "generator": MARKER, "name": name, "recorded_at": recorded_at, "workload": result.get("workload"),
        "peak_output_tokens_per_s": result.get("peak_output_tokens_per_s"),
        "peak_concurrency": result.get("peak_concurrency"),
        "saturation_concurrency": result.get("saturation_concurrency"),
        "levels": [{key: level.get(key) for key in ("concurrency", "completed", "failed", "output_tokens_per_s",
                                                    "request_throughput", "ttft_ms", "tpot_ms", "e2el_ms",
                                                    "joules_per_output_token")}
                   for level in result["levels"]]}, sort_keys=True) + "\n"


def write_files(module, files, result, markdown, baseline_levels, name):
    """Refuse files that are not ours (also in check mode), then write the report and append the history."""
    for path in files.values():
        if path:
            report_files.check_ours(path, MARKER)
    if module.check_mode:
        return
    if not os.path.isdir(os.path.dirname(files["json"])):
        os.makedirs(os.path.dirname(files["json"]), 0o750)
    recorded = dict(result, name=name, generator=MARKER,
                    recorded_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    recorded.pop("ansible_facts", None)
    report_files.write_atomic(module, files["json"], json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    report_files.write_atomic(module, files["markdown"], report_files.markdown_marker("vllm_bench_report") + markdown)
    if files["png"]:
        render_png(files["png"], name, result["levels"], baseline_levels)
        os.chmod(files["png"], report_files.REPORT_MODE)
    report_files.append_line(files["history"], history_line(name, recorded["recorded_at"], result), MARKER)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            result=dict(type="dict", required=True),
            name=dict(type="str", required=True),
            output_dir=dict(type="path", required=True),
            history_file=dict(type="path"),
            baseline=dict(type="path"),
            plot=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = params["result"]
    if "levels" not in result and "vllm_bench" in (result.get("ansible_facts") or {}):
        result = result["ansible_facts"]["vllm_bench"]
    if not isinstance(result.get("levels"), list):
        module.fail_json(msg="result: not a vllm_bench result (it has no 'levels' list); pass the registered result")
    if "/" in params["name"] or not params["name"].strip():
        module.fail_json(msg="name: '%s' must be a plain file name" % params["name"])
    if params["plot"] and plt is None:
        module.fail_json(msg=missing_required_lib("matplotlib", reason="for the PNG plot (or set plot: false)"))

    rows = None
    baseline_levels = None
    if params["baseline"]:
        try:
            baseline_levels = read_baseline(params["baseline"])
        except ValueError as exc:
            module.fail_json(msg="baseline: %s" % exc)
        rows = bench.compare_with_baseline(result["levels"], baseline_levels)

    base = os.path.join(params["output_dir"], params["name"])
    files = {"json": base + ".json", "markdown": base + ".md",
             "png": base + ".png" if params["plot"] else None,
             "history": params["history_file"] or os.path.join(params["output_dir"], "history.jsonl")}
    markdown = render_markdown(params["name"], result, rows)
    try:
        write_files(module, files, result, markdown, baseline_levels, params["name"])
    except report_files.ReportFileError as exc:
        module.fail_json(msg=str(exc), files=files)
    # A run always appends a history line, so it always changes something; check mode says so too.
    output = dict(changed=True, files=files, markdown=markdown)
    if rows is not None:
        output["comparison"] = rows
    module.exit_json(**output)


if __name__ == "__main__":
    main()
