#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_rollout_report
short_description: Write a fleet rollout's report, per host and for the fleet, as JSON and Markdown
version_added: 0.2.0
description:
  - Takes every host of a rollout in rollout order and the C(vllm_rollout_host_report) each published (role
    C(gauntlet.vllm.vllm_rollout)), and writes C(<name>.json) and C(<name>.md) under O(output_dir).
  - Each host's row shows its outcome (C(updated), C(unchanged), C(rolled_back), C(failed), or C(not_reached) for a host
    the rollout stopped before), the seconds of each step (drain, deploy, gate, return, rollback), the gate's verdict
    against the host's baseline and whether it went back into the router.
  - The fleet's summary counts the outcomes, and gives the rollout's span and the time each step took over the fleet.
  - A file whose content would not change is left alone. The files are written mode 0640 and carry the marker
    C(gauntlet.vllm.vllm_rollout_report) (the JSON's top-level C(generator), the Markdown's first line); a file at one
    of the paths without the marker in that place (one that merely mentions the module included) fails the task
    naming it and is left alone.
  - Meant to run on the controller (delegated to C(localhost)).
author:
  - gauntlet.vllm contributors (@gauntlet)
options:
  name:
    description: The report's file name without extension (a plain name, no C(/)).
    type: str
    required: true
  output_dir:
    description: The directory the files go to; created (0750) when missing.
    type: path
    required: true
  hosts:
    description: Every host of the rollout, in the order it rolled.
    type: list
    elements: str
    required: true
  reports:
    description: Host name to its C(vllm_rollout_host_report); a host missing here (or with an empty one) was not reached.
    type: dict
    required: true
  settings:
    description: The rollout's settings (batches, thresholds), kept in the JSON as they are.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Write the fleet report
  gauntlet.vllm.vllm_rollout_report:
    name: rollout-tiny-llama
    output_dir: "{{ playbook_dir }}/reports"
    hosts: "{{ groups['vllm_hosts'] }}"
    reports: "{{ dict(groups['vllm_hosts'] | zip(groups['vllm_hosts'] | map('extract', hostvars)
                 | map(attribute='vllm_rollout_host_report', default={}))) }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
summary:
  description: >-
    C(hosts), C(outcomes) (a count per outcome), C(succeeded) (no host failed, rolled back or left unreached),
    C(span_s) (first host's start to last host's end) and C(step_seconds) (each step's seconds summed over the fleet).
  returned: success
  type: dict
markdown:
  description: The Markdown report's text.
  returned: success
  type: str
files:
  description: The paths of C(json) and C(markdown).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gauntlet.vllm.plugins.module_utils.bench import report_files
from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_rollout import MODULE_NAME, GateError, fleet_report

ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "output_dir": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "reports": {"type": "dict", "required": True},
    "settings": {"type": "dict", "default": {}},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    problem = report_files.prologue_problem(params["name"], plot=False)
    if problem:
        module.fail_json(msg=problem)
    try:
        built = fleet_report(params["name"], params["hosts"], params["reports"], params["settings"])
    except GateError as exc:
        module.fail_json(msg=str(exc))
    files = report_files.report_paths(params["output_dir"], params["name"], plot=False)
    report = {"files": files, "json_doc": built["json_doc"], "markdown": built["markdown"], "png": None}
    written = report_files.write_report_or_fail(module, MODULE_NAME, report)
    files = dict((key, path) for key, path in written["files"].items() if path)
    module.exit_json(changed=written["changed"], summary=built["summary"], markdown=built["markdown"], files=files)


if __name__ == "__main__":
    main()
