"""The toolkit's own train_projector.py against ours with --exact-toolkit, online and offline: same bytes?

Generates the synthetic locomotion database (50,000 frames by default), runs a copy of the toolkit's
script (from ../shared/fixtures/toolkit/scripts, only ``niter`` changed) for ``--iterations``, then
``python train_projector.py --exact-toolkit`` online (BallTree), ``build-cache --exact-toolkit`` and
the offline run from that cache, each as its own process, one after the other. Prints each run's
wall time and the SHA-256 of its projector.bin, and whether all three are byte-identical.

    python benchmarks/parity_toolkit.py [--frames 50000] [--iterations 5001] [--json FILE]
    python benchmarks/parity_toolkit.py --decompressor [--frames 50000] [--iterations 2001]

Choose ``--iterations`` one more than a multiple of 1,000: the script writes projector.bin after
iterations 0, 1,000, 2,000, ..., so its last file is then that of the final iteration.
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import click

from motion_matching.data import generate

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = ROOT.parent / "shared" / "fixtures" / "toolkit" / "scripts"


def timed(command, *, cwd, env=None):
    """Run ``command`` (list) in ``cwd``; returns (wall seconds, CPU seconds of the child), or exits with its
    stderr if it fails."""
    started, before = time.perf_counter(), os.times()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds, after = time.perf_counter() - started, os.times()
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def digest(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def run_script(folder, iterations, script="train_projector.py"):
    """The toolkit's ``script``, copied with only ``niter`` changed, in ``folder``; returns ``timed``'s pair."""
    text = (SCRIPTS / script).read_text()
    if text.count("niter = 500000") != 1:
        sys.exit(f"{SCRIPTS / script}: expected one 'niter = 500000' line")
    (folder / script).write_text(text.replace("niter = 500000", f"niter = {iterations}"))
    env = dict(os.environ, PYTHONPATH=str(SCRIPTS), MPLBACKEND="Agg")
    return timed([sys.executable, script], cwd=folder, env=env)


def ours(folder, arguments, script="train_projector.py"):
    """``python SCRIPT ARGS`` of this project in ``folder``; returns ``timed``'s pair."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return timed([sys.executable, str(ROOT / script), *arguments], cwd=folder, env=env)


def decompressor_parity(frames, iterations):
    """The toolkit's train_decompressor.py and ``python train_decompressor.py --exact-toolkit`` on the same
    synthetic database: prints both runs' wall times and file digests; returns whether both files agree."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = pathlib.Path(scratch)
        generate.generate_files(folder, nframes=frames)
        timings = {"toolkit script": run_script(folder, iterations, "train_decompressor.py"),
                   "ours": ours(folder, ["--exact-toolkit", "--iterations", str(iterations), "--quiet", "--out",
                                         "ours"], "train_decompressor.py")}
        digests = {name: [digest((folder if name == "toolkit script" else folder / "ours") / file)
                          for file in ("decompressor.bin", "latent.bin")] for name in timings}
    print(f"synthetic database: {frames} frames; {iterations} iterations at batch 32")
    print(f"{'run':<16} {'wall s':>8} {'CPU s':>8}  decompressor.bin / latent.bin SHA-256")
    for name, (wall, cpu) in timings.items():
        print(f"{name:<16} {wall:8.1f} {cpu:8.1f}  {digests[name][0][:16]} / {digests[name][1][:16]}")
    identical = digests["toolkit script"] == digests["ours"]
    print(f"decompressor.bin and latent.bin byte-identical: {identical}")
    return identical


@click.command()
@click.option("--frames", default=50_000, show_default=True, help="Frames of the synthetic database.")
@click.option("--iterations", default=5_001, show_default=True, help="Iterations of each run.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here.")
@click.option("--decompressor", is_flag=True, help="Compare train_decompressor.py's two files instead (no JSON).")
def main(frames, iterations, json_path, decompressor):
    """Run the toolkit's script and ours (online, offline) with the same inputs and compare projector.bin."""
    if not SCRIPTS.is_dir():
        sys.exit(f"{SCRIPTS} is absent: the toolkit's script is needed")
    if decompressor:
        sys.exit(0 if decompressor_parity(frames, iterations) else 1)
    common = ["--exact-toolkit", "--iterations", str(iterations), "--quiet", "--held-out", "0"]
    with tempfile.TemporaryDirectory() as scratch:
        folder = pathlib.Path(scratch)
        generate.generate_files(folder, nframes=frames)
        rows = [("toolkit script", run_script(folder, iterations), folder / "projector.bin")]
        rows.append(("ours online", ours(folder, [*common, "--out", "online"]), folder / "online" / "projector.bin"))
        cache_seconds = ours(folder, ["build-cache", "--exact-toolkit", "--queries", str(iterations * 32),
                                      "--out", "toolkit_cache.h5", "--quiet"])
        rows.append(("ours offline", ours(folder, [*common, "--offline", "toolkit_cache.h5", "--out", "offline"]),
                     folder / "offline" / "projector.bin"))
        results = [{"run": name, "seconds": wall, "cpu_seconds": cpu, "sha256": digest(path)}
                   for name, (wall, cpu), path in rows]
    identical = len({row["sha256"] for row in results}) == 1
    script_seconds = results[0]["seconds"]
    print(f"command: python {' '.join(sys.argv)}")
    print(f"synthetic database: {frames} frames; {iterations} iterations at batch 32; toolkit cache of "
          f"{iterations * 32} queries built in {cache_seconds[0]:.1f} s ({cache_seconds[1]:.1f} s CPU)")
    print("x script: the toolkit script's wall time / this run's (the script also plots and logs to TensorBoard)")
    print(f"{'run':<16} {'wall s':>8} {'CPU s':>8} {'x script':>9}  projector.bin SHA-256")
    for row in results:
        print(f"{row['run']:<16} {row['seconds']:8.1f} {row['cpu_seconds']:8.1f} "
              f"{script_seconds / row['seconds']:9.2f}  {row['sha256']}")
    print(f"projector.bin byte-identical (script, online, offline): {identical}")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"command": sys.argv, "frames": frames, "iterations": iterations, "batch_size": 32,
                       "cache_seconds": cache_seconds[0], "cache_cpu_seconds": cache_seconds[1], "runs": results,
                       "identical": identical}, stream, indent=2)
    sys.exit(0 if identical else 1)


if __name__ == "__main__":
    main()
