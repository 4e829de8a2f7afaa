"""Per-query cost at runtime: projector inference against exact brute-force search, both in plain C.

The runtime calls the projector one query at a time instead of searching the database; this measures
why. Both loops run inside ``tools/nnet_eval.c`` (compiled here with the system compiler), one query
at a time, timed with a monotonic clock around the computation only (no file I/O). Each pass covers all
queries; the table shows the median (and min, max) over passes of microseconds per query.

    python benchmarks/bench_inference.py --json bench-out/inference.json
    taskset -c 0 python benchmarks/bench_inference.py --frames 100000 --passes 7
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from motion_matching.neighbours.queries import generate_queries
from motion_matching.projector import c_evaluator
from motion_matching.toolkit import formats

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_NETWORK = ROOT / "tests" / "data" / "toolkit" / "projector.bin"


def synthetic_features(nframes, nfeatures, seed):
    """Clustered random walks (nframes, nfeatures) float32, roughly shaped like matching features."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(nframes // 100, 1), nfeatures))
    walk = np.cumsum(rng.standard_normal((nframes, nfeatures)) * 0.05, axis=0)
    return (centres[rng.integers(0, len(centres), nframes)] + walk - walk.mean(0)).astype(np.float32)


def timed_passes(executable, mode, source, rows, passes):
    """Per-pass seconds of ``nnet_eval mode source rows - passes``."""
    done = c_evaluator.run_c_evaluator(executable, mode, source, rows, "-", repeats=passes)
    if done.returncode != 0:
        sys.exit(f"nnet_eval {mode} failed: {done.stderr.strip()}")
    return c_evaluator.parse_pass_seconds(done.stdout)


def summarise(seconds, count):
    """Median/min/max microseconds per query over the passes."""
    per_query = [1e6 * value / count for value in seconds]
    return {"median_us": statistics.median(per_query), "min_us": min(per_query), "max_us": max(per_query),
            "queries": count, "passes": len(per_query)}


def compiler_version():
    compiler = c_evaluator.find_compiler()
    first = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout.splitlines()
    return f"{compiler}: {first[0] if first else 'unknown version'}"


def run(args):
    """Build the evaluator, time both loops; returns the JSON-ready results dict."""
    network = formats.load_network(args.network)
    if args.features:
        features = formats.load_features(args.features).features
    else:
        features = synthetic_features(args.frames, network.sizes[0], args.seed)
    if features.shape[1] != network.sizes[0]:
        sys.exit(f"{args.network} takes {network.sizes[0]} inputs but the features have {features.shape[1]}")
    count = max(args.queries, args.search_queries)
    queries, _ = generate_queries(features, seed=args.seed, start=0, stop=count)
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        executable = c_evaluator.build_c_evaluator(folder, flags=tuple(args.cflags.split()))
        c_evaluator.write_matrix(folder / "network_queries.bin", queries[:args.queries])
        c_evaluator.write_matrix(folder / "search_queries.bin", queries[:args.search_queries])
        c_evaluator.write_matrix(folder / "frames.bin", features)
        inference = timed_passes(executable, "eval", args.network, folder / "network_queries.bin", args.passes)
        search = timed_passes(executable, "nearest", folder / "frames.bin", folder / "search_queries.bin",
                              args.passes)
    results = {"network": str(args.network), "sizes": network.sizes, "frames": int(features.shape[0]),
               "nfeatures": int(features.shape[1]), "features": str(args.features or "synthetic"),
               "compiler": compiler_version(), "cflags": args.cflags,
               "inference": summarise(inference, args.queries), "search": summarise(search, args.search_queries)}
    results["search_over_inference"] = results["search"]["median_us"] / results["inference"]["median_us"]
    return results


def print_table(results):
    print(f"network {results['network']} ({' -> '.join(map(str, results['sizes']))}); "
          f"{results['frames']} frames x {results['nfeatures']} features ({results['features']})")
    print(f"{results['compiler']}; flags {results['cflags']}")
    print(f"{'per query, one at a time':<34}{'median us':>11}{'min us':>10}{'max us':>10}{'queries':>9}{'passes':>8}")
    for name, label in (("inference", "projector inference (C)"), ("search", "exact brute-force search (C)")):
        row = results[name]
        print(f"{label:<34}{row['median_us']:>11.2f}{row['min_us']:>10.2f}{row['max_us']:>10.2f}"
              f"{row['queries']:>9}{row['passes']:>8}")
    print(f"search / inference (medians): {results['search_over_inference']:.2f}x")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", type=pathlib.Path, default=DEFAULT_NETWORK, help="network .bin to time")
    parser.add_argument("--features", type=pathlib.Path, help="features.bin to search (default: synthetic)")
    parser.add_argument("--frames", type=int, default=50_000, help="synthetic database frames")
    parser.add_argument("--queries", type=int, default=20_000, help="queries per inference pass")
    parser.add_argument("--search-queries", type=int, default=2_000, help="queries per search pass")
    parser.add_argument("--passes", type=int, default=5, help="timed passes of each loop")
    parser.add_argument("--cflags", default="-std=c99 -O3 -march=native",
                        help="compiler flags (both loops get the same)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    results = run(args)
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
