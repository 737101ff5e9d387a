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
  - When the sweep has open-loop levels (its C(rate_levels), from M(gauntlet.vllm.vllm_bench)'s C(request_rate)), the
    Markdown gains an C(Open loop) section, one row per rate level (target req/s or C(inf), marked C(searched) when the
    rate search added it; burstiness; achieved req/s; requests done and failed; good req/s, C(-) without an SLO; TTFT,
    TPOT and E2E p50 / p99 ms; requests the client still had waiting when the arrivals ended; prefix cache hit %; SLO
    met C(yes), C(no) or C(-)), the SLO misses per level, then the SLO and the max sustainable rate (or why there is
    none).
  - The PNG of an open-loop sweep shows p50 and p99 TTFT and E2E (log scale) and the achieved and good req/s against
    the target request rate, the max sustainable rate as a red line; an C(inf) level is a star at the rate it achieved,
    labelled C(inf). A sweep with both kinds of levels has both pairs of plots, the concurrency pair above.
  - Appends one line per run to O(history_file) (JSON lines), so runs of many days can be compared. A line keeps the
    workload, the peak and saturation, per concurrency level its throughput and latencies, per rate level
    C(request_rate), C(completed), C(failed), C(request_throughput), C(goodput), C(ttft_ms), C(tpot_ms) and
    C(e2el_ms), and the sweep's C(max_sustainable_rate).
  - Meant to run on the controller (delegated to C(localhost)), where the report is read; the PNG needs matplotlib
    there.
  - Existing files of an earlier run of the same O(name) are replaced, never the history.
  - The files are written mode 0640 and carry the marker C(gauntlet.vllm.vllm_bench_report) (a C(generator) key in
    the JSON and on each history line, a first-line comment in the Markdown, the PNG's C(Software) text). A file
    already at one of the paths without the marker in that place (the JSON's top-level C(generator), the Markdown's
    first line exactly, the PNG's C(Software) text, the C(generator) of the history's first line) was written by
    something else, even when it mentions the module; the module fails naming it and leaves it alone.
  - O(baseline) is read only up to 64 MiB and must be a JSON report of this module (with a C(levels) list). Only
    concurrency levels are compared.
  - An O(output_dir) that exists and is not a directory, or an O(history_file) whose directory does not exist,
    fails the task naming it before anything is written.
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
      real run, which always appends a history line. Files that are not ours and unusable directories fail the task
      in check mode as in a real run.
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
  description: The Markdown report (with its C(Open loop) section when the sweep has rate levels).
  returned: always
  type: str
comparison:
  description: Per concurrency level present in both runs, each compared figure with the baseline's and the change in %.
  returned: when O(baseline) is given
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import bench_report
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files

ARGUMENT_SPEC = dict(
    result=dict(type="dict", required=True),
    name=dict(type="str", required=True),
    output_dir=dict(type="path", required=True),
    history_file=dict(type="path"),
    baseline=dict(type="path"),
    plot=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        report = bench_report.build_report(module.params)
    except bench_report.BenchReportError as exc:
        module.fail_json(msg=str(exc))
    else:
        # A run always appends a history line, so it always changes something; check mode says so too.
        written = report_files.write_report_or_fail(module, bench_report.MODULE_NAME, report, history_line=report["history"])
        output = dict(written, markdown=report["markdown"])
        if report["rows"] is not None:
            output["comparison"] = report["rows"]
        module.exit_json(**output)


if __name__ == "__main__":
    main()
