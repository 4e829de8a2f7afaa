"""Commands: demo (the whole pipeline on the embedded synthetic data)."""
import click

from motion_matching.cli.group import main, reports_errors
from motion_matching.cli.progress import ProgressBar
from motion_matching.demo import DemoSettings, run_demo

_DEFAULTS = DemoSettings()


def _print_step(step, paths):
    click.echo(f"== {step}")
    for label, path in paths.items():
        if isinstance(path, str):
            click.echo(f"   {label}: {path}")


def _train_line(progress):
    click.echo(f"\r   iteration {progress.step:,}/{progress.iterations:,}  loss {progress.rolling_loss:.4f}  "
               f"{progress.rate:,.0f} it/s  ETA {progress.eta:4.0f} s", nl=False, err=True)
    if progress.step == progress.iterations:
        click.echo("", err=True)


@main.command("demo")
@click.option("--out", default="demo", show_default=True, type=click.Path(file_okay=False),
              help="Folder for every file.")
@click.option("--frames", default=_DEFAULTS.frames, show_default=True, type=click.IntRange(min=1000),
              help="Frames of the synthetic database.")
@click.option("--iterations", default=_DEFAULTS.iterations, show_default=True, type=click.IntRange(min=1),
              help="Training iterations (the toolkit runs 500,000).")
@click.option("--batch-size", default=_DEFAULTS.batch_size, show_default=True, type=click.IntRange(min=1))
@click.option("--threads", type=click.IntRange(min=1),
              help="CPU threads for search and training [default: every core].")
@reports_errors
def demo(out, frames, iterations, batch_size, threads):
    """Generate a synthetic database, build its exact-neighbour cache, train offline, export, evaluate.

    Example: mm-projector demo --out demo --iterations 10000
    """
    settings = DemoSettings(frames=frames, iterations=iterations, batch_size=batch_size, threads=threads)
    bar = ProgressBar()
    evaluation = run_demo(out, settings, report=lambda step, paths: (bar.close(), _print_step(step, paths)),
                          cache_progress=bar, train_progress=_train_line)
    losses = ", ".join(f"{name} {value:.4f}" for name, value in evaluation["losses"].items())
    click.echo(f"held-out: {losses}; top-1 match {evaluation['match']['top1']:.1%}")
