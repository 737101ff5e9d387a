# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The ``vllm serve`` command line a unit will run, built on the controller by the same function the
gauntlet.vllm.vllm_args_check module uses on the host (module_utils/planning/vllm_args.build_serve_args).

Its documentation is in vllm_serve_argv.yml next to this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gauntlet.vllm.plugins.module_utils.io.safe_io import full_match
from ansible_collections.gauntlet.vllm.plugins.module_utils.planning.vllm_args import ArgsBuildError, build_serve_args


def vllm_serve_argv(settings, venv="/opt/vllm/venv"):
    if not isinstance(settings, dict) or not settings.get("model"):
        raise AnsibleFilterError("vllm_serve_argv takes a dict of serving settings with a model, got %r" % (settings,))
    try:
        return [venv.rstrip("/") + "/bin/vllm", "serve"] + build_serve_args(settings)
    except ArgsBuildError as exc:
        raise AnsibleFilterError("vllm_serve_argv: %s" % exc)


# Chat templates the collection ships (roles/vllm_service/files/chat_templates/) and where vllm_service puts them
# on the host. One rule for both the role that copies them and the plan that shows the command line.
SHIPPED_TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                 "roles", "vllm_service", "files", "chat_templates")
HOST_TEMPLATES = "/etc/vllm/chat-templates"
# Matched whole (safe_io.full_match): ``$`` would also accept a trailing newline.
TEMPLATE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def vllm_chat_template(name):
    """{shipped, path}: a bare file name shipped with the collection lands under HOST_TEMPLATES; anything else (a host
    path, a template name vLLM knows, empty) is passed to vLLM as given."""
    name = "" if name is None else str(name)
    shipped = full_match(TEMPLATE_NAME, name) and os.path.isfile(os.path.join(SHIPPED_TEMPLATES, name))
    return {"shipped": shipped, "path": HOST_TEMPLATES + "/" + name if shipped else name}


class FilterModule(object):
    def filters(self):
        return {"vllm_serve_argv": vllm_serve_argv, "vllm_chat_template": vllm_chat_template}
