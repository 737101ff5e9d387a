# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Controller side of gauntlet.vllm.vllm_wait: look at the target until the model answers.

Each look runs the vllm_wait module on the target (unit state, journal, /health, a completion);
this loop decides, prints progress, and returns the timings. Keeping the loop here means a
36-minute load is many short module runs, not one connection held open for 36 minutes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gauntlet.vllm.plugins.module_utils.vllm_probe import ARGUMENT_SPEC, scaled_timeout, verdict

display = Display()

MODULE = "gauntlet.vllm.vllm_wait"


def _clock(seconds):
    seconds = int(seconds)
    return "%dm%02ds" % (seconds // 60, seconds % 60) if seconds >= 60 else "%ds" % seconds


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        validation, new_args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        params = validation.validated_parameters
        limit = scaled_timeout(params)
        unit = params["unit"]

        started = time.monotonic()
        initial_restarts = None
        phases = []
        last_print = None
        look = {}
        state = {}
        while True:
            look = self._execute_module(module_name=MODULE, module_args=new_args, task_vars=task_vars)
            if look.get("failed"):
                look.setdefault("ready", False)
                return look
            waited = time.monotonic() - started
            state = look["unit_state"]
            if initial_restarts is None:
                # Restarts before this wait (an earlier failed start) are not this start's failure.
                initial_restarts = state["n_restarts"]
            phase = look.get("phase")
            if phase and (not phases or phases[-1]["phase"] != phase):
                phases.append({"phase": phase, "seen_after_s": round(waited, 1)})

            outcome, why = verdict(look, initial_restarts)
            if outcome == "ready":
                completion = look["completion"]
                result.update(
                    changed=False,
                    ready=True,
                    # Units without a readiness ExecStartPost: the server's age at this completion.
                    time_to_ready_s=look["ready_after_s"] if look.get("ready_after_s") is not None else look["running_s"],
                    first_completion_latency_s=completion["latency_s"],
                    waited_s=round(waited, 1),
                    timeout_s=limit,
                    phase=phase,
                    phases=phases,
                    completion=completion,
                    unit_state=state,
                )
                return result
            if outcome == "failed" or waited >= limit:
                if outcome != "failed":
                    why = "not ready after %s (limit %d s; scale it with checkpoint_bytes or set timeout)" % (
                        _clock(waited), limit)
                tail = look.get("journal_tail") or []
                result.update(
                    failed=True,
                    ready=False,
                    waited_s=round(waited, 1),
                    timeout_s=limit,
                    phase=phase,
                    phases=phases,
                    unit_state=state,
                    journal_tail=tail,
                    msg="%s: %s; state %s/%s, last phase: %s. Last journal lines:\n%s" % (
                        unit, why, state["active_state"], state["sub_state"], phase or "none seen",
                        "\n".join(tail) or "(journal empty)"),
                )
                return result

            changed_phase = len(phases) and phases[-1]["seen_after_s"] == round(waited, 1)
            if last_print is None or changed_phase or waited - last_print >= params["progress_interval"]:
                last_print = waited
                health = look.get("health") or {}
                detail = ""
                if health.get("status") == 200 and look.get("completion"):
                    detail = ", completion not yet: %s" % look["completion"].get("error")
                display.display("%s: %s elapsed of %s, %s/%s, %s%s" % (
                    unit, _clock(waited), _clock(limit), state["active_state"], state["sub_state"],
                    phase or "starting", detail))
            time.sleep(min(params["poll_interval"], max(0.0, limit - waited)))
