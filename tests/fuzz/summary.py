"""Print the fuzz catalogue's outcome counts per area: ``python tests/fuzz/summary.py [area ...] [-v]``."""

import collections
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import BAD_OUTCOMES, report, run_case  # noqa: E402
from test_fuzz import ALL, _load  # noqa: E402


def main(argv):
    verbose = "-v" in argv
    areas = [a for a in argv if not a.startswith("-")]
    total = collections.Counter()
    for module, name in ALL:
        if areas and module.removeprefix("cases_") not in areas:
            continue
        results = run_case(module, _load(module)[name])
        counts = collections.Counter(r["outcome"] for r in results)
        total.update(counts)
        print(f"{name:<60} {len(results):5d} calls  " + "  ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        if verbose and any(r["outcome"] in BAD_OUTCOMES for r in results):
            print("    " + report(results).replace("\n", "\n    "))
    print(f"{'total':<60} {sum(total.values()):5d} calls  " + "  ".join(f"{k} {v}" for k, v in sorted(total.items())))
    return 1 if any(total[k] for k in BAD_OUTCOMES) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
