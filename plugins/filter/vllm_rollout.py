# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The rollout's health gate: a host's short sweep after a deployment against its recorded baseline.

Its documentation is in vllm_gate_verdict.yml next to this file; the logic is in module_utils/fleet/vllm_rollout.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.fleet.vllm_rollout import GateError, gate_verdict


def vllm_gate_verdict(measured, baseline=None, concurrency=None, max_regression=0.25, max_error_rate=0.0):
    """The gate's verdict; bad input fails the task naming the field."""
    if concurrency is None:
        raise AnsibleFilterError("vllm_gate_verdict needs concurrency=<the gate's level>")
    try:
        level = int(concurrency)
    except (TypeError, ValueError, OverflowError):
        raise AnsibleFilterError("vllm_gate_verdict: concurrency: %r is not a whole number" % (concurrency,))
    try:
        # float() reads "nan" and "inf": gate_verdict refuses them by name.
        return gate_verdict(measured, baseline or None, level, float(max_regression), float(max_error_rate))
    except (GateError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("vllm_gate_verdict: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"vllm_gate_verdict": vllm_gate_verdict}
