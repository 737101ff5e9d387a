# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters over the planner's performance model (logic in module_utils/planning/vllm_perf).

Their documentation is in the .yml file of each filter next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_perf import calibration_from_levels, prediction_errors


def vllm_calibration(estimate, levels, source=None):
    if not isinstance(estimate, dict):
        raise AnsibleFilterError("vllm_calibration takes a plan's estimate (a dict from gauntlet.vllm.vllm_plan), got %s"
                                 % type(estimate).__name__)
    if not isinstance(levels, (list, tuple)):
        raise AnsibleFilterError("vllm_calibration takes the levels of gauntlet.vllm.vllm_bench (a list), got %s"
                                 % type(levels).__name__)
    try:
        return calibration_from_levels(estimate, list(levels), source=source)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def vllm_prediction_errors(estimate, levels):
    if not isinstance(estimate, dict) or not isinstance(levels, (list, tuple)):
        raise AnsibleFilterError("vllm_prediction_errors takes a plan's estimate (a dict) and the levels of "
                                 "gauntlet.vllm.vllm_bench (a list), got %s and %s"
                                 % (type(estimate).__name__, type(levels).__name__))
    return prediction_errors(estimate, list(levels))


class FilterModule(object):
    def filters(self):
        return {"vllm_calibration": vllm_calibration, "vllm_prediction_errors": vllm_prediction_errors}
