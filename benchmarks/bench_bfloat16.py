"""Is bfloat16 faster than float32 on this CPU? The matrix products of the networks' hidden layers, both ways.

``--precision auto`` (every fast recipe's) trains in bfloat16 only where ``training.step.native_bfloat16``
says the device multiplies bfloat16 matrices faster. This measures what that rule is about: products of
(rows, 512) by (512, 512), the shape of a 512-unit hidden layer on a batch, in float32 and in bfloat16, on
1 and 2 threads, the two dtypes interleaved within each repeat so a busy spell hits both. Prints the CPU's
vendor and flags, GFLOP/s (median over repeats) and the ratio bfloat16 / float32, and whether the rule's
choice is the faster one here. Writes JSON.

    python benchmarks/bench_bfloat16.py --json benchmarks/results/bfloat16.json
"""
import json
import platform
import statistics
import time

import click
import torch

from motion_matching import machine
from motion_matching.training.step import native_bfloat16

HIDDEN = 512


def _seconds_per_product(a, b, products):
    a @ b  # warm: the first call picks and prepares the kernel
    started = time.perf_counter()
    for _ in range(products):
        a @ b
    return (time.perf_counter() - started) / products


@click.command()
@click.option("--rows", "row_counts", multiple=True, type=click.IntRange(min=1), default=(256, 1024),
              show_default=True, help="Rows of the left matrix (a batch; repeatable).")
@click.option("--threads", "thread_counts", multiple=True, type=click.IntRange(min=1), default=(1, 2),
              show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=7, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None)
def main(row_counts, thread_counts, repeats, json_path):
    """GFLOP/s of float32 and bfloat16 products of a 512-unit layer, and the auto precision's choice."""
    flags = {name: bool(getattr(torch.cpu, f"_is_{name}_supported", lambda: False)())
             for name in ("avx512_bf16", "amx_tile")}
    choice = "bfloat16" if native_bfloat16(torch.device("cpu")) else "float32"
    print(f"CPU {machine.cpu_vendor()} ({platform.processor() or platform.machine()}), flags {flags}; "
          f"auto precision chooses {choice}")
    rows_out = []
    print(f"{'threads':>7} {'rows':>5} {'float32 GFLOP/s':>16} {'bfloat16 GFLOP/s':>17} {'bf16/f32':>9}")
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for rows in row_counts:
            flop = 2 * rows * HIDDEN * HIDDEN
            products = max(10, 2_000_000_000 // flop)
            rates = {"float32": [], "bfloat16": []}
            matrices = {name: (torch.randn(rows, HIDDEN).to(getattr(torch, name)),
                               torch.randn(HIDDEN, HIDDEN).to(getattr(torch, name))) for name in rates}
            for _ in range(repeats):
                for name, (a, b) in matrices.items():
                    rates[name].append(flop / _seconds_per_product(a, b, products) / 1e9)
            medians = {name: statistics.median(values) for name, values in rates.items()}
            ratio = medians["bfloat16"] / medians["float32"]
            rows_out.append({"threads": threads, "rows": rows, "gflops": medians, "bf16_over_f32": ratio})
            print(f"{threads:>7} {rows:>5} {medians['float32']:>16.0f} {medians['bfloat16']:>17.0f} {ratio:>9.2f}")
    faster = all((row["bf16_over_f32"] > 1) == (choice == "bfloat16") for row in rows_out)
    print(f"auto's choice ({choice}) is {'the faster' if faster else 'NOT the faster'} in every row")
    if json_path:
        with open(json_path, "w") as out:
            json.dump({"cpu_vendor": machine.cpu_vendor(), "flags": flags, "auto_chooses": choice,
                       "auto_is_faster": faster, "repeats": repeats, "torch": torch.__version__,
                       "rows": rows_out}, out, indent=1)


if __name__ == "__main__":
    main()
