"""Write bench/data/injection_heldout.jsonl: a fixed sample of the evaluation sources
whose licence lets them be copied, for bench/injection.py's offline smoke test; and
bench/data/injection_overlap.json.gz, what of the training sources the check of that
sample against them needs (bench/contamination.py). DIR must hold every source.

::

    python training/make_bench_sample.py --data DIR
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.contamination import write_overlap  # noqa: E402
from training.sources import SOURCES, Row, load  # noqa: E402

NOT_COPIED = ("tensor-trust-",)  # no licence stated
PER_GROUP = 25


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--overlap-only", action="store_true",
                    help="keep the sample as it is; write its overlap with the training "
                         "sources again (after they changed)")
    args = ap.parse_args()
    rows, missing = load(args.data, "eval")
    train, missing_train = load(args.data, "train")
    if missing or missing_train:
        sys.exit(f"missing: {', '.join(missing + missing_train)}")
    out = ROOT / "bench/data/injection_heldout.jsonl"
    if args.overlap_only:
        with out.open(encoding="utf-8") as f:
            kept = [Row(d["text"], d["attack"], d["source"], d["lang"])
                    for d in map(json.loads, f)]
        write_overlap(kept, out, train, [s.name for s in SOURCES if s.role == "train"])
        print(ROOT / "bench/data/injection_overlap.json.gz")
        return
    groups: dict[tuple[str, bool, str], list[Row]] = defaultdict(list)
    for r in rows:
        if not r.source.startswith(NOT_COPIED):
            groups[r.source, r.attack, r.lang].append(r)
    sample: list[Row] = []
    with out.open("w", encoding="utf-8") as f:
        for key in sorted(groups):
            g = groups[key]
            n = PER_GROUP if key[0] != "xquad" else 8
            for r in random.Random(repr(key)).sample(g, min(n, len(g))):
                sample.append(r)
                f.write(json.dumps({"source": r.source, "attack": r.attack, "lang": r.lang,
                                    "text": r.text}, ensure_ascii=False) + "\n")
    print(out, out.stat().st_size)
    write_overlap(sample, out, train, [s.name for s in SOURCES if s.role == "train"])
    print(ROOT / "bench/data/injection_overlap.json.gz")


if __name__ == "__main__":
    main()
