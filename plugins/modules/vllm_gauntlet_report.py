#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_gauntlet_report
short_description: Rank the candidates of a gauntlet and write the comparison as JSON, Markdown and a PNG plot
version_added: 0.1.0
description:
  - Takes every candidate of a gauntlet (measured with M(gauntlet.vllm.vllm_bench), skipped because the planner
    rejected its plan, or failed when launched) and ranks the measured ones by O(rank_by).
  - Writes, under O(output_dir), C(<name>.json) (the ranking with every candidate's sweep), C(<name>.md) (a table,
    winner first, skipped and failed candidates with their reasons, the planner's predicted figures beside the measured
    ones) and C(<name>.png) (output tok/s and the budgeted latency against concurrency, one line per measured candidate
    and a dashed one for its prediction; for O(rank_by=max_rate_within_slo), the achieved req/s and p99 TTFT against the
    target request rate, each candidate's max sustainable rate a dotted line in its colour, the SLOs' TTFT limits
    dashed red).
  - A file whose content would not change is left alone, so a re-run of a finished gauntlet reports no change. The
    PNG follows the data; it is drawn when the JSON or the Markdown changes, or when it is missing.
  - An O(output_dir) that exists and is not a directory fails the task naming it before anything is written.
  - Meant to run on the controller (delegated to C(localhost)); the PNG needs matplotlib there.
  - The files are written mode 0640 and carry the marker C(gauntlet.vllm.vllm_gauntlet_report) (a C(generator) key,
    a first-line comment, the PNG's C(Software) text). A file already at one of the paths without the marker in that
    place (the JSON's top-level C(generator), the Markdown's first line exactly, the PNG's C(Software) text) was
    written by something else, even when it mentions the module; the module fails naming it and leaves it alone.
author:
  - gauntlet.vllm contributors (@gauntlet)
requirements:
  - matplotlib (for the PNG)
options:
  candidates:
    description:
      - Every candidate, in the order the gauntlet lists them (that order breaks ties).
      - Each is a dict with C(name), C(status) (C(measured), C(skipped) or C(failed)), and C(result) (the
        registered M(gauntlet.vllm.vllm_bench) result, or its C(ansible_facts.vllm_bench)) when measured, or
        C(reason) otherwise. C(model), C(plan) and C(time_to_ready_s) are shown in the table when present; other
        keys are kept in the JSON.
      - C(estimate) (optional) is the planner's estimate of the candidate's plan (M(gauntlet.vllm.vllm_plan)'s
        C(plans[].estimate)); its peak and C=1 output tok/s are shown beside the measured ones with the ratio
        measured / predicted, and its levels are drawn in the PNG as dashed lines with hollow markers. A candidate
        without one shows C(-) there.
    type: list
    elements: dict
    required: true
  rank_by:
    description:
      - C(peak_output_tokens_per_s) ranks by the highest output tok/s at any concurrency level.
      - C(output_tokens_per_s_within_latency_budget) ranks by the highest output tok/s among the levels that keep
        O(latency_budget); a candidate with no such level is not ranked.
      - For these two, only concurrency levels that completed every request count.
      - C(max_rate_within_slo) ranks by the highest request rate (req/s) a candidate sustained within its SLO, the
        C(max_sustainable_rate) of its M(gauntlet.vllm.vllm_bench) sweep, measured with C(request_rate) levels and a
        C(goodput) SLO. A candidate without one is not ranked; its note is the sweep's C(max_sustainable_rate_reason)
        (or C(no open-loop levels)). The table then shows the target rate in place of the concurrency, and the
        Markdown says which SLO the rates were judged by, or that it differs between the candidates.
    type: str
    choices: [peak_output_tokens_per_s, output_tokens_per_s_within_latency_budget, max_rate_within_slo]
    default: peak_output_tokens_per_s
  latency_budget:
    description: The latency a level must keep to count, for O(rank_by=output_tokens_per_s_within_latency_budget).
    type: dict
    suboptions:
      metric:
        description: Which latency.
        type: str
        choices: [ttft_ms, tpot_ms, itl_ms, e2el_ms]
        default: ttft_ms
      statistic:
        description: Which statistic of it.
        type: str
        choices: [mean, median, p90, p99]
        default: p99
      max_ms:
        description: The most it may be, in milliseconds.
        type: float
        required: true
  incumbent:
    description:
      - The candidate that serves now (for example C(original) in an NCCL sweep). Another candidate only wins when it
        beats the incumbent's score by more than O(min_gain_pct) percent; the closer one is ranked below it with a note.
    type: str
  min_gain_pct:
    description: The gain over O(incumbent), in percent, a challenger needs to win.
    type: float
    default: 0
  name:
    description: Name of the gauntlet, used in file names and the title.
    type: str
    default: gauntlet
  output_dir:
    description: Directory for the report files; created when missing.
    type: path
    required: true
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
    details: In check mode it ranks and renders the table, writes nothing, and predicts C(changed) by comparing the
      JSON and Markdown it would write with the files already there, byte for byte; the PNG is not drawn, it is
      predicted by the rule a real run follows (drawn when the JSON or Markdown changes, or when it is missing).
      Files that are not ours and an unusable O(output_dir) fail the task in check mode as in a real run.
seealso:
  - module: gauntlet.vllm.vllm_bench
  - module: gauntlet.vllm.vllm_bench_report
"""

EXAMPLES = r"""
- name: Rank by throughput at a p99 TTFT of 2 s at most
  gauntlet.vllm.vllm_gauntlet_report:
    name: kimi-vs-minimax
    output_dir: "{{ playbook_dir }}/reports/kimi-vs-minimax"
    rank_by: output_tokens_per_s_within_latency_budget
    latency_budget:
      metric: ttft_ms
      statistic: p99
      max_ms: 2000
    candidates:
      - name: kimi-int4-tp8
        model: kimi-k25-int4
        plan: TP8
        status: measured
        result: "{{ kimi_bench }}"
      - name: minimax-tp6
        model: minimax-m25
        plan: TP6
        status: skipped
        reason: "vLLM would raise ValueError at config validation: ..."
  delegate_to: localhost
  register: gauntlet
"""

RETURN = r"""
ranking:
  description: Every candidate, best first, then the unranked ones in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The candidate.
      type: str
    status:
      description: C(measured), C(skipped) or C(failed).
      type: str
    rank:
      description: 1 for the winner; null when the candidate is not ranked.
      type: int
    score:
      description: The figure it is ranked by (output tok/s; req/s for O(rank_by=max_rate_within_slo)), or null.
      type: float
    concurrency:
      description: The concurrency level the score comes from (null for O(rank_by=max_rate_within_slo)).
      type: int
    request_rate:
      description:
        - The target request rate (req/s) of the open-loop level the score comes from, or C(inf) when every request
          sent at once met the SLO (the score is then the rate achieved); for O(rank_by=max_rate_within_slo) only,
          null otherwise.
      type: raw
    latency_ms:
      description: The budgeted latency statistic at that level (budget ranking only).
      type: float
    reason:
      description: Why it is not ranked (vLLM's message for a skipped plan, the failure, or no level within budget).
      type: str
    predicted_peak_output_tokens_per_s:
      description: The planner's peak output tok/s for the candidate's plan (from its C(estimate)), or null.
      type: float
    predicted_c1_output_tokens_per_s:
      description: The planner's output tok/s at concurrency 1 (its C=1 level, else its single-stream figure), or null.
      type: float
    measured_c1_output_tokens_per_s:
      description: The measured output tok/s at concurrency 1, or null when the sweep has no such level.
      type: float
    peak_ratio:
      description: Measured peak output tok/s divided by the predicted one, or null.
      type: float
    c1_ratio:
      description: Measured C=1 output tok/s divided by the predicted one, or null.
      type: float
winner:
  description: The winning candidate's row of RV(ranking), or null when none was ranked.
  returned: always
  type: dict
markdown:
  description: The Markdown table.
  returned: always
  type: str
files:
  description: The paths of C(json), C(markdown) and C(png) (null without O(plot)); set also in check mode.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import gauntlet
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files
# The plot's prediction lines, kept importable from the module where the unit tests look for them.
from ansible_collections.gauntlet.vllm.plugins.module_utils.bench.gauntlet import draw_predicted  # noqa: F401 pylint: disable=unused-import

ARGUMENT_SPEC = dict(
    candidates=dict(type="list", elements="dict", required=True),
    rank_by=dict(type="str", default="peak_output_tokens_per_s", choices=list(gauntlet.RANK_BY)),
    latency_budget=dict(type="dict", options=dict(
        metric=dict(type="str", default="ttft_ms", choices=list(gauntlet.LATENCY_METRICS)),
        statistic=dict(type="str", default="p99", choices=list(gauntlet.LATENCY_STATISTICS)),
        max_ms=dict(type="float", required=True),
    )),
    incumbent=dict(type="str"),
    min_gain_pct=dict(type="float", default=0.0),
    name=dict(type="str", default="gauntlet"),
    output_dir=dict(type="path", required=True),
    plot=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_if=[("rank_by", "output_tokens_per_s_within_latency_budget", ["latency_budget"])])
    try:
        report = gauntlet.build_report(module.params)
    except gauntlet.GauntletError as exc:
        module.fail_json(msg=str(exc))
    else:
        # Files whose bytes would not change are left alone; the PNG is redrawn when they change or it is missing.
        written = report_files.write_report_or_fail(module, gauntlet.MODULE_NAME, report)
        summary = gauntlet.summary(report["ranking"])
        module.exit_json(changed=written["changed"], ranking=summary, winner=summary[0] if report["winner"] else None,
                         markdown=report["markdown"], files=report["files"])


if __name__ == "__main__":
    main()
