# -*- coding: utf-8 -*-
# The rig's podman connection: containers.podman.podman with pipelining, entering the container
# with nsenter instead of `podman exec`.
#
# containers.podman's plugin turns pipelining off because it runs `podman exec` without `-i`, which
# does not pass stdin on to the command. Here each module runs as one command with its code on stdin
# instead of mkdir, copy, chmod, run and rm.
#
# That one command was still `podman exec`, and a `podman mount` before it (Ansible connects anew for
# every task): measured on the rig, 0.12 s of CPU and 0.14 s of wall time per exec (conmon and runc),
# against 0.01 s for `nsenter -t PID -a` into the container's namespaces, with the container's
# environment, root and working directory. The rig's scenarios run some ten thousand such tasks on two
# cores. Files go through /proc/PID/root, which sees the container's own mounts (its tmpfs, its
# volumes), as `podman mount` does not. The container's PID is looked up once (`podman inspect`) and
# kept, with its start time so that a recreated container is never mistaken for the old one.
# Without root or nsenter, or with a remote user, it falls back to `podman exec`.
#
# scripts/lib.sh puts this directory on ANSIBLE_CONNECTION_PLUGINS and turns ANSIBLE_PIPELINING on;
# molecule's podman driver names the connection `podman`, which resolves here before the redirect to
# containers.podman. It is part of the test rig, not of the collection.
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

import json
import os
import shlex
import shutil
import subprocess
import tempfile

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

_KNOWN_CONTAINERS = os.path.join(tempfile.gettempdir(), "gauntlet-rig-containers")


def _start_time(pid):
    """The start time of process PID (field 22 of /proc/PID/stat), or None if there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2:].split()[19].decode()


class Connection(PodmanConnection):
    """containers.podman.podman, entering the container with nsenter when it can, else `podman exec -i`."""

    transport = "podman"
    has_pipelining = True

    def _connect(self):
        self._target = self._nsenter_target()
        self._mount_point = b"/proc/%d/root" % self._target["pid"] if self._target else None
        self._connected = True
        return self

    def _nsenter_target(self):
        """The container's PID and environment, if nsenter can enter it; else None."""
        if self.user or os.geteuid() != 0 or not shutil.which("nsenter"):
            return None
        known = os.path.join(_KNOWN_CONTAINERS, self._container_id.replace("/", "_"))
        try:
            with open(known) as known_file:
                target = json.load(known_file)
            if _start_time(target["pid"]) == target["start"]:
                return target
        except (OSError, ValueError, KeyError, TypeError):
            pass
        rc, stdout, stderr = self._podman(["inspect", "--format", "{{json .State.Pid}} {{json .Config.Env}}"])
        pid, env = (to_native(stdout).strip().split(" ", 1) + [""])[:2]
        if rc != 0 or not pid.isdigit() or int(pid) == 0:
            return None
        target = {"pid": int(pid), "start": _start_time(int(pid)), "env": json.loads(env or "[]"),
                  "nsenter": shutil.which("nsenter")}
        os.makedirs(_KNOWN_CONTAINERS, mode=0o700, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=_KNOWN_CONTAINERS, delete=False) as new_file:
            json.dump(target, new_file)
        os.replace(new_file.name, known)
        return target

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        args = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        if self._target is None:
            exec_args = ["exec", "-i"] if in_data is not None else ["exec"]
            if self.user:
                exec_args.extend(("--user", self.user))
            return self._podman(exec_args, args, in_data)
        env = dict(item.partition("=")[::2] for item in self._target["env"])
        process = subprocess.Popen(
            [self._target["nsenter"], "-t", str(self._target["pid"]), "-a"] + args,
            env=env,
            stdin=subprocess.PIPE if in_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stdout, stderr = process.communicate(input=in_data)
        return process.returncode, stdout, stderr
