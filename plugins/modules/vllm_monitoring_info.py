#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_monitoring_info
short_description: Read each vLLM unit's KV-cache usage, queue and watchdog state on its host
version_added: 0.1.0
description:
  - For every systemd unit that runs a vLLM server (found as M(gauntlet.vllm.vllm_service_info) finds them), or only
    those named in O(units), reads the server's C(/metrics) on the host itself and the state file of its watchdog
    (written by the role M(gauntlet.vllm.vllm_service)), and reports per unit the KV-cache usage, the running and
    waiting requests, the preemption, token and request counters and the watchdog's restarts.
  - RV(summary) gathers what a health gate reads in one place (any unit given up by its watchdog, the fullest KV cache,
    the requests waiting on the host).
  - C(/metrics) is read with a plain HTTP GET to the unit's C(--host) when that is one address, else C(127.0.0.1),
    on its C(--port); vLLM serves C(/metrics) without its API key. A unit that is not active, or a C(/metrics)
    that cannot be read or is not vLLM's (not Prometheus text, or a series given twice, which the format forbids and
    which would otherwise be added up), gets RV(units[].metrics=null) and RV(units[].metrics_error) saying why; no
    figure is ever made up.
  - This module only reads; it sets no facts.
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  units:
    description:
      - Names of the units to report (for example C(vllm-tiny-llama.service)). Each must be a vLLM unit of the host,
        else the module fails naming it.
      - Empty reports every vLLM unit of the host.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait for each unit's C(/metrics).
    type: float
    default: 5
  state_dir:
    description:
      - The state directory of the role M(gauntlet.vllm.vllm_service) (its C(vllm_service_state_dir)); the watchdog
        of unit C(U) keeps its state in C(<state_dir>/watchdog/U.json).
    type: path
    default: /var/lib/gauntlet-vllm
extends_documentation_fragment:
  # First, so its support levels win over the generic fragment's placeholders.
  - gauntlet.vllm.attributes
  - ansible.builtin.action_common_attributes
notes:
  - Figures summed over label sets (one per engine of a data-parallel server and per served model name); the
    KV-cache usage is the highest of them.
  - C(vllm:request_success_total) counts every finished request whatever its C(finished_reason), as vLLM writes
    it (vLLM 0.32 also counts C(abort) and C(error) there).
  - A server started with C(--ssl-certfile) is read over HTTPS without checking its certificate (the address read
    is the server's own, not the name its certificate names).
seealso:
  - module: gauntlet.vllm.vllm_service_info
  - module: gauntlet.vllm.vllm_wait
"""

EXAMPLES = r"""
- name: Read the vLLM units' load and watchdogs
  gauntlet.vllm.vllm_monitoring_info:
  register: vllm_monitoring

- name: Health gate before the next host is rolled
  ansible.builtin.assert:
    that:
      - vllm_monitoring.summary.active == vllm_monitoring.summary.units
      - not vllm_monitoring.summary.gave_up
      - vllm_monitoring.summary.metrics_errors | length == 0
      - (vllm_monitoring.summary.max_kv_cache_usage | default(0, true)) < 0.9
    fail_msg: "{{ vllm_monitoring.units | map(attribute='metrics_error') | select | list }}"

- name: One unit, with a short timeout
  gauntlet.vllm.vllm_monitoring_info:
    units: [vllm-tiny-llama.service]
    timeout: 2
  register: tiny
"""

RETURN = r"""
units:
  description: Each vLLM unit reported, by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Unit name.
      type: str
      sample: vllm-tiny-llama.service
    active_state:
      description: systemd C(ActiveState).
      type: str
      sample: active
    port:
      description: The C(--port) it serves on (vLLM's default 8000 when absent); null when it is not a number.
      type: int
      sample: 8000
    model:
      description: The model it serves, from its command line.
      type: str
      sample: /opt/models/tiny-llama
    url:
      description: The C(/metrics) address read (or that would be read when the unit is active).
      type: str
      sample: http://127.0.0.1:8000/metrics
    metrics:
      description:
        - Figures read from C(/metrics); null when the unit is not active or its C(/metrics) could not be read or
          parsed (RV(units[].metrics_error) says why).
        - A figure whose metric the server does not export is null.
      type: dict
      contains:
        kv_cache_usage:
          description: KV-cache usage, 0 to 1 (C(vllm:kv_cache_usage_perc), or C(vllm:gpu_cache_usage_perc) of older vLLM).
          type: float
          sample: 0.42
        requests_running:
          description: Requests running now (C(vllm:num_requests_running)).
          type: int
          sample: 3
        requests_waiting:
          description: Requests queued (C(vllm:num_requests_waiting)).
          type: int
          sample: 0
        preemptions_total:
          description: Preemptions since the server started (C(vllm:num_preemptions_total)).
          type: int
          sample: 0
        generation_tokens_total:
          description: Tokens generated since the server started (C(vllm:generation_tokens_total)).
          type: int
          sample: 84
        prompt_tokens_total:
          description: Prompt tokens processed since the server started (C(vllm:prompt_tokens_total)).
          type: int
          sample: 26
        request_success_total:
          description: Requests finished since the server started (C(vllm:request_success_total), every C(finished_reason)).
          type: int
          sample: 6
    metrics_error:
      description: Why RV(units[].metrics) is null (the unit's state, or the URL and what went wrong); null otherwise.
      type: str
      sample: "http://127.0.0.1:8000/metrics could not be read: [Errno 111] Connection refused"
    watchdog:
      description:
        - The unit's watchdog state; null when it has no state file (no watchdog, or it has not run yet) or the file
          is unusable (RV(units[].watchdog_error) says why).
      type: dict
      contains:
        restarts_total:
          description: Restarts the watchdog made, ever.
          type: int
        restarts_last_hour:
          description: Restarts it made in the last hour.
          type: int
        gave_up:
          description: Whether it reached its restarts-per-hour limit and left the unit failed.
          type: bool
        consecutive_failures:
          description: Failed probes in a row.
          type: int
        last_probe:
          description: The last probe (C(time), C(ok), C(reason)), as the state file holds it; null before the first.
          type: dict
        last_restart:
          description: The last restart (C(time), C(reason)); null when it never restarted the unit.
          type: dict
    watchdog_error:
      description:
        - The state file and why it could not be used (unreadable, not a regular file, larger than 1 MiB, not UTF-8,
          not JSON or nested too deeply, wrong shape); null otherwise.
        - The state file is read without blocking (a FIFO is refused, never waited on), and an unusable one is
          reported here for its unit while the other units are still reported; the module does not fail for it.
      type: str
summary:
  description: The host at a glance, for a health gate.
  returned: always
  type: dict
  contains:
    units:
      description: Units reported.
      type: int
    active:
      description: Units whose C(ActiveState) is C(active).
      type: int
    gave_up:
      description: Whether any unit's watchdog gave up.
      type: bool
    gave_up_units:
      description: The units whose watchdog gave up.
      type: list
      elements: str
    max_kv_cache_usage:
      description: The fullest KV cache of the units whose metrics were read; null when none was.
      type: float
    requests_waiting:
      description: Requests waiting over the units whose metrics were read; null when none was.
      type: int
    metrics_errors:
      description: Units with a RV(units[].metrics_error).
      type: list
      elements: str
    watchdog_errors:
      description: Units with a RV(units[].watchdog_error).
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_monitoring import DEFAULT_STATE_DIR, monitoring_info
from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_units import UnitsError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            units=dict(type="list", elements="str", default=[]),
            timeout=dict(type="float", default=5),
            state_dir=dict(type="path", default=DEFAULT_STATE_DIR),
        ),
        supports_check_mode=True,
    )
    if not module.params["timeout"] > 0:
        module.fail_json(msg="timeout must be a number of seconds above 0 (got %s)" % module.params["timeout"])
    systemctl = module.get_bin_path("systemctl", required=True)

    def run(args):
        return module.run_command([systemctl] + args)

    try:
        result = monitoring_info(run, module.params)
    except UnitsError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
