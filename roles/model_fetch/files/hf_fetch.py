# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gauntlet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Download one Hub repo at one revision with huggingface_hub, on the target host.

Run by the model_fetch role with the target's Python that has huggingface_hub. Arguments come as
one JSON object on stdin (so nothing secret is on the command line); the token comes from the
HF_TOKEN environment variable, the mirror from HF_ENDPOINT. Prints one JSON object: the commit the
revision resolved to, the files fetched, and the Hub's size and sha256 of each LFS file, which
model_verify checks the download against.

huggingface_hub keeps partial files (``.incomplete``) and resumes them with HTTP Range requests,
so a rerun after an interrupted transfer continues where it stopped.

With ``"plan": true`` nothing is downloaded: it prints the commit, the path the files would land in
and the Hub's size (and sha256) of every file the patterns select, for the free-space check.
"""

import json
import os
import sys


def main():
    args = json.load(sys.stdin)
    from huggingface_hub import HfApi, snapshot_download  # the target's huggingface_hub

    api = HfApi()
    info = api.model_info(args["repo_id"], revision=args["revision"], files_metadata=True)
    if args.get("plan"):
        print(json.dumps(plan(args, info)))
        return
    kwargs = dict(repo_id=args["repo_id"], revision=info.sha, allow_patterns=args.get("allow_patterns") or None,
                  ignore_patterns=args.get("ignore_patterns") or None, max_workers=args.get("workers") or 8)
    if args.get("layout") == "hf_cache":
        path = snapshot_download(cache_dir=args["dest"], **kwargs)
    else:
        path = snapshot_download(local_dir=args["dest"], **kwargs)
    files = {}
    for sibling in info.siblings:
        if os.path.exists(os.path.join(path, sibling.rfilename)):
            entry = {"size": sibling.size}
            if sibling.lfs:
                entry["sha256"] = sibling.lfs.sha256
            files[sibling.rfilename] = entry
    print(json.dumps({"path": path, "commit": info.sha, "files": files}))


def plan(args, info):
    """What a download would bring: the path, the commit and the selected files' sizes (and sha256)."""
    from huggingface_hub.utils import filter_repo_objects

    names = set(filter_repo_objects([sibling.rfilename for sibling in info.siblings],
                                    allow_patterns=args.get("allow_patterns") or None,
                                    ignore_patterns=args.get("ignore_patterns") or None))
    path = args["dest"]
    if args.get("layout") == "hf_cache":
        path = os.path.join(args["dest"], "models--" + args["repo_id"].replace("/", "--"), "snapshots", info.sha)
    files = {}
    for sibling in info.siblings:
        if sibling.rfilename in names:
            files[sibling.rfilename] = {"size": sibling.size}
            if sibling.lfs:
                files[sibling.rfilename]["sha256"] = sibling.lfs.sha256
    return {"path": path, "commit": info.sha, "files": files}


if __name__ == "__main__":
    main()
