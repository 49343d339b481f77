"""Fetch the training and evaluation sources (training/sources.py) at their recorded
commits into a data directory, for train_injection.py and bench/injection.py.

::

    python training/fetch_sources.py --data /tmp/injection-data
    python training/fetch_sources.py --data DIR --mirror ROOT   # bare git dirs at
        ROOT/<owner>+<name>/repo instead of cloning from GitHub

Each source's files land under DIR/<owner>+<name>/<path>, taken with `git archive`
from the recorded commit, so the same commit gives the same files.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import subprocess
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from training.sources import SOURCES, Source


def _git_dir(source: Source, mirror: Path | None, cache: Path) -> Path:
    name = source.repo.replace("/", "+")
    if mirror is not None and (mirror / name / "repo").exists():
        return mirror / name / "repo"
    target = cache / f"{name}.git"
    if not target.exists():
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none",
                        f"https://github.com/{source.repo}.git", str(target)], check=True)
    return target


def _expand(git_dir: Path, commit: str, items: tuple[str, ...]) -> list[str]:
    top = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "--name-only", commit],
                         check=True, capture_output=True, text=True).stdout.split()
    out: list[str] = []
    for item in items:
        out.extend(sorted(n for n in top if fnmatch.fnmatch(n, item)) if "*" in item else [item])
    return out


def fetch(source: Source, data: Path, mirror: Path | None) -> None:
    git_dir = _git_dir(source, mirror, data / ".git-cache")
    paths = _expand(git_dir, source.commit, source.export or source.paths)
    tar = subprocess.run(["git", "--git-dir", str(git_dir), "archive", source.commit, "--",
                          *paths], check=True, capture_output=True).stdout
    dest = source.folder(data)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest, filter="data")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--mirror", type=Path, default=None)
    ap.add_argument("--only", nargs="*", default=None, help="source names")
    args = ap.parse_args()
    for s in SOURCES:
        if (args.only and s.name not in args.only) or not s.repo:
            continue  # (a source of this repository: nothing to fetch)
        print(f"{s.name}: {s.repo} @ {s.commit[:12]}", flush=True)
        fetch(s, args.data, args.mirror)


if __name__ == "__main__":
    main()
