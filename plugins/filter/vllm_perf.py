# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters over the planner's performance model (logic in module_utils/planning/vllm_perf).

Their documentation is in the .yml file of each filter next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import is_finite_number, json_type_name
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_perf import calibration_from_levels, prediction_errors

# The figures the two filters read of a bench level and of a plan's estimate level: a number, or a dict of them
# (a bench summary {median, mean, p99}, the model's parts, the simulation's p50). One NaN or infinity among them
# turns every ratio of the fit, or an error percentage, into NaN.
MEASURED_FIGURES = (("output_tokens_per_s",), ("tpot_ms",), ("ttft_ms",))
PREDICTED_FIGURES = (("output_tokens_per_s",), ("tpot_ms",), ("parts",), ("simulated", "output_throughput"),
                     ("simulated", "tpot_ms"))
# The estimate level's parts that must be dicts when present.
PREDICTED_DICTS = ("parts", "simulated")


def _numbers(value, where):
    """``(place, number)`` for ``value`` when it is a number, or for each number directly in it when it is a dict;
    anything else (null, a string) the model skips as a missing figure."""
    items = value.items() if isinstance(value, dict) else [(None, value)]
    for key, item in items:
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            yield (where if key is None else "%s.%s" % (where, key)), item


def _figure_at(level, path):
    for key in path:
        level = level.get(key) if isinstance(level, dict) else None
    return level


def _check_finite(level, figures, where):
    for path in figures:
        for place, number in _numbers(_figure_at(level, path), "%s.%s" % (where, ".".join(path))):
            if not is_finite_number(number):
                raise AnsibleFilterError("%s is %s: every figure must be a finite number (a NaN or infinite one "
                                         "would make every result NaN)" % (place, number))


def checked_levels(levels, where, figures, dicts=()):
    """``levels`` as a list, each a dict whose ``figures`` are finite and whose ``dicts`` are dicts when present;
    AnsibleFilterError naming ``where[index]`` and the field otherwise. None is no levels."""
    if levels is None:
        return []
    if not isinstance(levels, (list, tuple)):
        raise AnsibleFilterError("%s must be a list of levels, got %s" % (where, json_type_name(levels)))
    for index, level in enumerate(levels):
        here = "%s[%d]" % (where, index)
        if not isinstance(level, dict):
            raise AnsibleFilterError("%s must be a level (a dict), got %s" % (here, json_type_name(level)))
        for key in dicts:
            if level.get(key) is not None and not isinstance(level[key], dict):
                raise AnsibleFilterError("%s.%s must be a dict, got %s" % (here, key, json_type_name(level[key])))
        _check_finite(level, figures, here)
    return list(levels)


def checked_inputs(name, estimate, levels):
    """The estimate (its levels checked, each with a concurrency) and the bench levels, checked for ``name``."""
    if not isinstance(estimate, dict):
        raise AnsibleFilterError("%s takes a plan's estimate (a dict from gauntlet.vllm.vllm_plan), got %s"
                                 % (name, type(estimate).__name__))
    if not isinstance(levels, (list, tuple)):
        raise AnsibleFilterError("%s takes the levels of gauntlet.vllm.vllm_bench (a list), got %s"
                                 % (name, type(levels).__name__))
    predicted = checked_levels(estimate.get("levels"), "estimate.levels", PREDICTED_FIGURES, PREDICTED_DICTS)
    for index, level in enumerate(predicted):
        if "concurrency" not in level:
            raise AnsibleFilterError("estimate.levels[%d] has no concurrency: is it a level of a plan's estimate?" % index)
    return dict(estimate, levels=predicted), checked_levels(levels, "levels", MEASURED_FIGURES)


def vllm_calibration(estimate, levels, source=None):
    estimate, levels = checked_inputs("vllm_calibration", estimate, levels)
    try:
        return calibration_from_levels(estimate, levels, source=source)
    except KeyError as exc:
        raise AnsibleFilterError("vllm_calibration: a level of the estimate lacks %s: is it a plan's estimate from "
                                 "gauntlet.vllm.vllm_plan?" % exc)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def vllm_prediction_errors(estimate, levels):
    estimate, levels = checked_inputs("vllm_prediction_errors", estimate, levels)
    try:
        return prediction_errors(estimate, levels)
    except KeyError as exc:
        raise AnsibleFilterError("vllm_prediction_errors: a level of the estimate lacks %s: is it a plan's estimate "
                                 "from gauntlet.vllm.vllm_plan?" % exc)


class FilterModule(object):
    def filters(self):
        return {"vllm_calibration": vllm_calibration, "vllm_prediction_errors": vllm_prediction_errors}
