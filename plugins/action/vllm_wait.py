# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Controller side of gauntlet.vllm.vllm_wait: look at the target until the model answers.

Each look runs the vllm_wait module on the target (unit state, journal, /health, a completion, and with
``tool_check`` / ``reasoning_check`` the recipe check's chat request); ``wait_until_ready`` decides (a chat
request the server refuses with HTTP 400 ends the wait at once), and progress lines go to the controller's display.
The options, the recipe check's included, come from ``vllm_probe.ARGUMENT_SPEC`` and go to the module unchanged. Keeping the loop
here means a 36-minute load is many short module runs, not one connection held for 36 minutes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gauntlet.vllm.plugins.module_utils.serving.vllm_probe import ARGUMENT_SPEC, wait_until_ready

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        validation, module_args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)

        def look_once():
            return self._execute_module(module_name="gauntlet.vllm.vllm_wait", module_args=module_args,
                                        task_vars=task_vars)

        result.update(wait_until_ready(look_once, validation.validated_parameters, display.display))
        return result
