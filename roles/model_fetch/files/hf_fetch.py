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
"""

import json
import os
import sys


def main():
    args = json.load(sys.stdin)
    from huggingface_hub import HfApi, snapshot_download  # the target's huggingface_hub

    api = HfApi()
    info = api.model_info(args["repo_id"], revision=args["revision"], files_metadata=True)
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


if __name__ == "__main__":
    main()
