"""Milliseconds per iteration of the toolkit's own training scripts on this machine: the basis of every
"a tenth of the toolkit's time" bar.

Each script (``../shared/fixtures/toolkit/scripts/train_<network>.py``, run, never copied into the
project) runs twice in a temporary folder with the 50,000-frame synthetic database (or ``--data``): a copy
of its text with only ``niter = 500000`` changed to ``--short`` and to ``--long`` iterations. Both runs
pay the start-up and the save at iteration 0, so (long - short) / (long - short iterations) is the steady
step, its TensorBoard logging included. ``--repeats`` alternates the pairs; the median is reported, with
the script's 500,000 iterations at that rate. The stepper learns ``--latent`` (default: the stepper
anchor's latent.bin).

    python benchmarks/bench_toolkit_scripts.py --json benchmarks/results/toolkit-scripts.json
"""
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import click

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT.parent / "shared" / "fixtures" / "toolkit" / "scripts"
ANCHOR_LATENT = ROOT / "benchmarks" / "anchors" / "stepper" / "latent.bin"
TOOLKIT_ITERATIONS = 500_000


def _run_seconds(network, iterations, data, latent, folder):
    """Wall seconds of the toolkit's ``train_<network>.py`` with ``niter`` set to ``iterations``."""
    work = pathlib.Path(folder) / f"{network}-{iterations}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in ("database.bin", "features.bin"):
        shutil.copyfile(pathlib.Path(data) / name, work / name)
    if network == "stepper":
        shutil.copyfile(latent, work / "latent.bin")
    text = (SCRIPTS / f"train_{network}.py").read_text()
    if text.count("niter = 500000") != 1:
        raise click.ClickException(f"{SCRIPTS}/train_{network}.py: no single 'niter = 500000' to change")
    (work / f"train_{network}.py").write_text(text.replace("niter = 500000", f"niter = {iterations}"))
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS), "MPLBACKEND": "Agg"}
    started = time.perf_counter()
    subprocess.run([sys.executable, f"train_{network}.py"], cwd=work, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


@click.command()
@click.option("--network", "networks", multiple=True, type=click.Choice(["decompressor", "stepper"]),
              default=("decompressor", "stepper"), show_default=True)
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="A folder with database.bin and features.bin [default: the 50,000-frame synthetic database].")
@click.option("--latent", type=click.Path(exists=True, dir_okay=False), default=str(ANCHOR_LATENT),
              show_default=True, help="The stepper's latent.bin.")
@click.option("--short", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--long", "long_", type=click.IntRange(min=2), default=650, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None)
def main(networks, data, latent, short, long_, repeats, json_path):
    """Time the toolkit's scripts: ms per iteration, and their whole recipe at that rate."""
    if long_ <= short:
        raise click.UsageError("--long must be more iterations than --short")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        if data is None:
            from motion_matching.data import generate
            data = os.path.join(folder, "data")
            generate.generate_files(data, nframes=50_000)
        for network in networks:
            steps = []
            for _ in range(repeats):
                seconds = {n: _run_seconds(network, n, data, latent, folder) for n in (short, long_)}
                steps.append((seconds[long_] - seconds[short]) / (long_ - short))
            step = statistics.median(steps)
            rows.append({"network": network, "ms_per_iteration": 1000 * step,
                         "each_repeat_ms": [1000 * s for s in steps],
                         "recipe_hours": step * TOOLKIT_ITERATIONS / 3600})
            click.echo(f"{network:>12}: {1000 * step:6.1f} ms per iteration (repeats "
                       f"{', '.join(f'{1000 * s:.1f}' for s in steps)}); {TOOLKIT_ITERATIONS:,} iterations "
                       f"{step * TOOLKIT_ITERATIONS / 3600:.2f} h, a tenth {step * TOOLKIT_ITERATIONS / 600:.1f} min")
    if json_path:
        with open(json_path, "w") as out:
            json.dump({"short": short, "long": long_, "repeats": repeats, "python": platform.python_version(),
                       "machine": platform.processor() or platform.machine(), "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
