"""Is the default thread policy fast on a machine that is not idle? Training and build-cache beside busy processes.

On the synthetic locomotion database (``generate_database.py --out``: 50,000 frames), for three workloads
(training from a cache with the ``fast`` recipe, batch 1,024; with the ``toolkit`` recipe, batch 32;
``build-cache`` of ``--queries`` queries), each under the default thread policy, ``--threads 1`` and
``--threads N`` (N: the cores this process may use), with 0, 1 and N busy processes beside it (a pure
Python loop each, started here and killed at the end of each load level, also on Ctrl-C; ``--nice 19``
runs them as background jobs, which yield their cores). Every run is a fresh subprocess (OpenMP reads
its environment at start) timing a fixed iteration (query) count, its whole library call included (the
policy's load sample too). Repeats interleave every configuration;
medians are reported, with the default's rate over the better fixed count's (required: >= 0.95 idle,
>= 0.85 with busy processes).

    python benchmarks/bench_contention.py [--fast-iterations 150] [--toolkit-iterations 600]
                                          [--queries 1000000] [--repeats 3] [--run-timeout 60]
                                          [--workloads fast,toolkit,build-cache] [--loads 0,1,N]
                                          [--nice 0] [--quick] [--json FILE]

A column beside the table times ``--threads N`` idle with libgomp's own spin count (``GOMP_SPINCOUNT``
300,000 instead of the package's 10,000): what the short spinning costs an idle machine.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ORIGINAL_ENV = dict(os.environ)  # before the package sets its OpenMP defaults: every child starts from this

import click  # noqa: E402

WORKLOADS = ("fast", "toolkit", "build-cache")
REQUIRED = {0: 0.95}  # idle; 0.85 with any busy processes
BUSY_LOOP = "while True: pass"
LIBGOMP_SPIN = "300000"  # libgomp's own spin count, spelled out: the package then leaves it alone


def child_train(spec):
    """Train ``spec['iterations']`` iterations of recipe ``spec['workload']`` from ``spec['cache']``."""
    import torch

    from motion_matching.projector.recipes import recipe_config
    from motion_matching.projector.train import train_projector
    threads = {} if spec["threads"] is None else {"threads": spec["threads"]}
    config = recipe_config(spec["workload"], iterations=spec["iterations"], **threads)
    started = time.perf_counter()
    result = train_projector(config, features_path=spec["features"], latent_path=spec["latent"],
                             offline_cache=spec["cache"], out_dir=spec["out"], held_out_queries=0)
    seconds = time.perf_counter() - started
    return {"rate": spec["iterations"] / seconds, "seconds": seconds,
            "threads": torch.load(result.checkpoint_path, weights_only=False)["threads"]}


def child_build(spec):
    """Build a cache of ``spec['queries']`` queries; the rate is queries/s of the whole call."""
    from motion_matching.cache import build as build_module
    chosen, logged = [], build_module.logged

    def recording(choice, doing):
        chosen.append(choice.threads)
        return logged(choice, doing)

    build_module.logged = recording
    started = time.perf_counter()
    build_module.build_cache(spec["features"], out=spec["out"], nqueries=spec["queries"], threads=spec["threads"])
    seconds = time.perf_counter() - started
    return {"rate": spec["queries"] / seconds, "seconds": seconds, "threads": chosen[0]}


def run_child(spec, *, timeout):
    """Run one configuration in a fresh interpreter; returns its result dict. A run killed after ``timeout``
    seconds counts as its work over ``timeout`` (an upper bound of its rate), marked ``timed_out``."""
    try:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                              env={**ORIGINAL_ENV, **spec.get("env", {})}, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        work = spec["queries"] if spec["workload"] == "build-cache" else spec["iterations"]
        return {"rate": work / timeout, "seconds": timeout, "threads": spec["threads"] or 0,
                "timed_out": True}
    if done.returncode != 0:
        raise click.ClickException(f"{spec['workload']} run failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class BusyProcesses:
    """``count`` pure-Python busy loops (of niceness ``nice``), running inside the ``with`` block and killed when
    it ends."""

    def __init__(self, count, nice=0):
        self.count, self.processes = count, []
        self.prefix = ["nice", "-n", str(nice)] if nice else []  # nice execs the loop: its pid is the loop's

    def __enter__(self):
        self.processes = [subprocess.Popen([*self.prefix, sys.executable, "-c", BUSY_LOOP], env=ORIGINAL_ENV)
                          for _ in range(self.count)]
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()
        return False

    @property
    def pids(self):
        return [process.pid for process in self.processes]


def prepare(folder, *, frames, queries, quick):
    """Write the synthetic database and a training cache into ``folder``; returns the paths (dict)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, os.path.join(root, "generate_database.py"), "--out", folder, "--frames", str(frames)]
    subprocess.run(command, env=ORIGINAL_ENV, check=True, capture_output=True)
    paths = {name: os.path.join(folder, f"{name}.bin") for name in ("features", "latent")}
    paths["cache"] = os.path.join(folder, "train_cache.h5")
    subprocess.run([sys.executable, os.path.join(root, "train_projector.py"), "build-cache", "--features",
                    paths["features"], "--queries", str(queries), "--out", paths["cache"], "--quiet"],
                   env=ORIGINAL_ENV, check=True, capture_output=True)
    return paths


def specs(workload, folder, paths, policies, *, iterations, queries):
    """One spec per policy (key, threads or None for the default, extra environment) for ``workload``, each
    writing into its own folder."""
    for key, threads, env in policies:
        out = tempfile.mkdtemp(dir=folder)
        spec = {"workload": workload, "key": key, "threads": threads, "env": env, "features": paths["features"]}
        if workload == "build-cache":
            yield dict(spec, queries=queries, out=os.path.join(out, "cache.h5"))
        else:
            yield dict(spec, iterations=iterations[workload], latent=paths["latent"], cache=paths["cache"], out=out)


def measure(folder, paths, *, workloads, loads, cores, repeats, iterations, queries, timeout, echo, nice=0):
    """({(workload, busy, key): [result dicts]} over ``repeats`` interleaved rounds, the busy loops' pids)."""
    policies = [("default", None, {})] + [(f"threads_{count}", count, {}) for count in sorted({1, cores})]
    spin = [(f"spin_{cores}", cores, {"GOMP_SPINCOUNT": LIBGOMP_SPIN})]  # idle only: what short spinning costs
    results, pids = {}, []
    for repeat in range(repeats):
        for busy in loads:
            with BusyProcesses(busy, nice) as loops:
                pids += loops.pids
                for workload in workloads:
                    chosen = policies + (spin if busy == 0 else [])
                    for spec in specs(workload, folder, paths, chosen, iterations=iterations, queries=queries):
                        result = run_child(spec, timeout=timeout)
                        results.setdefault((workload, busy, spec["key"]), []).append(result)
                        echo(f"repeat {repeat + 1}/{repeats}, {busy} busy, {workload}, {spec['key']}: "
                             f"{result['rate']:,.1f}/s on {result['threads']} threads"
                             f"{' (timed out: at most)' if result.get('timed_out') else ''}")
    return results, pids


def summary(results, *, workloads, loads, cores):
    """Rows (dicts) of medians, the default over the better fixed count, and whether it meets the requirement."""
    rows = []
    for workload in workloads:
        for busy in loads:
            row = {"workload": workload, "busy": busy}
            for key in ("default", "threads_1", f"threads_{cores}", f"spin_{cores}"):
                runs = results.get((workload, busy, key), [])
                if runs:
                    row[key] = statistics.median(run["rate"] for run in runs)
                    row[key + "_rates"] = [run["rate"] for run in runs]
                    row[key + "_chose"] = sorted({run["threads"] for run in runs})
                    row[key + "_timed_out"] = sum(bool(run.get("timed_out")) for run in runs)
            best = max(row[key] for key in row if key.startswith("threads_") and key.count("_") == 1)
            row["ratio"] = row["default"] / best
            row["required"] = REQUIRED.get(busy, 0.85)
            row["met"] = row["ratio"] >= row["required"]
            rows.append(row)
    return rows


def rate(row, key):
    """A median rate for the table: "" when not measured, "<= " before one with runs that timed out."""
    if key not in row:
        return ""
    return ("<= " if row[key + "_timed_out"] else "") + f"{row[key]:,.1f}"


def table(rows, cores):
    """The rows as a Markdown table (str)."""
    unit = {"fast": "it/s", "toolkit": "it/s", "build-cache": "queries/s"}
    lines = [f"| workload | busy processes | default (threads chosen) | --threads 1 | --threads {cores} | "
             f"default / best | required | met | --threads {cores}, libgomp's spin |", "|---|" * 1 + "---|" * 8]
    for row in rows:
        fixed = [rate(row, key) for key in ("threads_1", f"threads_{cores}", f"spin_{cores}")]
        chose = ",".join(str(n) for n in row["default_chose"])
        lines.append(f"| {row['workload']} ({unit[row['workload']]}) | {row['busy']} | {rate(row, 'default')} "
                     f"({chose}) | {fixed[0]} | {fixed[1]} | {row['ratio']:.2f} | {row['required']:.2f} | "
                     f"{'yes' if row['met'] else 'NO'} | {fixed[2]} |")
    return "\n".join(lines)


@click.command()
@click.option("--frames", default=50_000, show_default=True, help="Frames of the synthetic database.")
@click.option("--fast-iterations", default=150, show_default=True, help="Timed iterations, fast recipe (batch 1,024).")
@click.option("--toolkit-iterations", default=600, show_default=True,
              help="Timed iterations, toolkit recipe (batch 32).")
@click.option("--queries", default=1_000_000, show_default=True, help="Queries of each build-cache run.")
@click.option("--repeats", default=3, show_default=True, help="Interleaved repeats; medians are reported.")
@click.option("--workloads", default=",".join(WORKLOADS), show_default=True, help="Comma-separated subset.")
@click.option("--loads", default=None, help="Busy process counts, comma-separated [default: 0,1,N].")
@click.option("--run-timeout", default=60, show_default=True,
              help="Seconds after which a run is stopped and counted at its work over this time (a bound).")
@click.option("--nice", default=0, show_default=True, type=click.IntRange(0, 19),
              help="Niceness of the busy loops (19: background jobs, which yield their cores to the run).")
@click.option("--quick", is_flag=True, help="A tiny run (for the tests): 3,000 frames, few iterations.")
@click.option("--json", "json_path", default=None, help="Also write the results to this JSON file.")
@click.option("--child", default=None, hidden=True)
def main(frames, fast_iterations, toolkit_iterations, queries, repeats, workloads, loads, run_timeout, nice, quick,
         json_path, child):
    """Print the contention table; see the module docstring."""
    if child is not None:
        spec = json.loads(child)
        click.echo(json.dumps(child_build(spec) if spec["workload"] == "build-cache" else child_train(spec)))
        return
    from motion_matching.threads import available_cores
    cores = available_cores()
    if quick:
        frames, fast_iterations, toolkit_iterations, queries, repeats = 3000, 10, 20, 5000, 1
    workloads = [name for name in workloads.split(",") if name]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        raise click.BadParameter(f"unknown workloads: {', '.join(unknown)}", param_hint="--workloads")
    loads = sorted({0, 1, cores}) if loads is None else [int(count) for count in loads.split(",")]
    iterations = {"fast": fast_iterations, "toolkit": toolkit_iterations}
    click.echo("command: " + " ".join([os.path.basename(sys.executable), *sys.argv]))
    click.echo(f"{cores} cores available; busy processes: {', '.join(map(str, loads))}"
               f"{f' at niceness {nice}' if nice else ''}")
    with tempfile.TemporaryDirectory() as folder:
        train_queries = max(fast_iterations * 1024, toolkit_iterations * 32)
        paths = prepare(folder, frames=frames, queries=train_queries, quick=quick)
        results, pids = measure(folder, paths, workloads=workloads, loads=loads, cores=cores, repeats=repeats,
                          iterations=iterations, queries=queries, timeout=run_timeout, echo=click.echo, nice=nice)
    rows = summary(results, workloads=workloads, loads=loads, cores=cores)
    click.echo(table(rows, cores))
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"command": sys.argv, "cores": cores, "frames": frames, "iterations": iterations,
                       "queries": queries, "repeats": repeats, "run_timeout": run_timeout, "nice": nice, "rows": rows,
                       "busy_pids": pids}, stream, indent=1)


if __name__ == "__main__":
    main()
