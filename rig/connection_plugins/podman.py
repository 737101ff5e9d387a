# -*- coding: utf-8 -*-
# The rig's podman connection: containers.podman.podman with pipelining.
#
# containers.podman's plugin turns pipelining off because it runs `podman exec` without `-i`, which
# does not pass stdin on to the command. With `-i` when there is input, each module runs as one
# `podman exec` with its code on stdin instead of mkdir, copy, chmod, run and rm: the rig's
# scenarios spend most of their simple tasks on those execs. scripts/lib.sh puts this directory on
# ANSIBLE_CONNECTION_PLUGINS and turns ANSIBLE_PIPELINING on; molecule's podman driver names the
# connection `podman`, which resolves here before the redirect to containers.podman.
# It is part of the test rig, not of the collection.
from __future__ import annotations

DOCUMENTATION = r"""
name: podman
short_description: containers.podman.podman with pipelining (test rig only)
description:
  - Runs commands in podman containers like C(containers.podman.podman), passing module code on
    stdin (C(podman exec -i)) so that Ansible can pipeline.
author: gauntlet.vllm
options:
  remote_addr:
    description: The ID or name of the container.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description: The user in the container.
    vars:
      - name: ansible_user
    env:
      - name: ANSIBLE_REMOTE_USER
    ini:
      - section: defaults
        key: remote_user
  podman_extra_args:
    description: Extra arguments for every podman command.
    default: ''
    vars:
      - name: ansible_podman_extra_args
    env:
      - name: ANSIBLE_PODMAN_EXTRA_ARGS
  podman_executable:
    description: The podman executable.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
  pipelining:
    description: Run modules through stdin instead of a copied file.
    type: boolean
    default: false
    env:
      - name: ANSIBLE_PIPELINING
    ini:
      - section: defaults
        key: pipelining
      - section: connection
        key: pipelining
    vars:
      - name: ansible_pipelining
"""

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    """containers.podman.podman, with `podman exec -i` when a command has input."""

    transport = "podman"
    has_pipelining = True

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        exec_args = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            exec_args.extend(("--user", self.user))
        return self._podman(exec_args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)
