# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timings of module_utils/hostlist.py expand()/compress() on 10k and 100k names.

Not a test: prints the best of a few runs per operation.

    python3 tests/bench/bench_hostlist.py [--repeat 5]
"""

from __future__ import print_function

import argparse
import importlib.util
import pathlib
import random
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_hostlist():
    path = ROOT / "plugins" / "module_utils" / "hostlist.py"
    spec = importlib.util.spec_from_file_location("hybridhpc_hostlist_bench", str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best(func, repeat):
    times = []
    result = None
    for _unused in range(repeat):
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return min(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    hl = load_hostlist()
    rng = random.Random(1)

    for count in (10000, 100000):
        names = ["node%06d" % i for i in range(1, count + 1) if i % 997]
        shuffled = list(names)
        rng.shuffle(shuffled)
        with_dups = shuffled + shuffled[: count // 10]
        rng.shuffle(with_dups)
        expr = hl.compress(names)
        joined = ",".join(shuffled)
        mixed = ["%s%04d" % (p, i) for p in ("cn", "gpu", "rack1-n", "rack2-n") for i in range(count // 4)]
        rng.shuffle(mixed)
        cases = [
            ("compress sequential", hl.compress, (names,), {}),
            ("compress shuffled", hl.compress, (shuffled,), {}),
            ("compress shuffled, sort=True", hl.compress, (shuffled,), {"sort": True}),
            ("compress 4 prefixes shuffled, sort=True", hl.compress, (mixed,), {"sort": True}),
            ("compress +10% duplicates, sort=True", hl.compress, (with_dups,), {"sort": True}),
            ("compress one comma-joined string", hl.compress, (joined,), {}),
            ("expand compressed (%d chars)" % len(expr), hl.expand, (expr,), {}),
            ("expand comma-joined string", hl.expand, (joined,), {}),
            ("expand list of names", hl.expand, (shuffled,), {}),
        ]
        print("%d names (%d after gaps)" % (count, len(names)))
        for label, func, fargs, kwargs in cases:
            seconds, _unused = best(lambda f=func, a=fargs, k=kwargs: f(*a, **k), args.repeat)
            print("  %-42s %8.1f ms" % (label, seconds * 1000))


if __name__ == "__main__":
    main()
