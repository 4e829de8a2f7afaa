"""Commands: export, evaluate."""
import click

from motion_matching.cli.group import SEED, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FILE, OUTPUT_FOLDER
from motion_matching.neighbours.queries import HELD_OUT_SEED
from motion_matching.neighbours.search import BACKENDS, DEFAULT_BACKEND
from motion_matching.projector.defaults import EVALUATION_QUERIES, EXPORT_FORMATS
from motion_matching.toolkit import recipe

_FILE = INPUT_FILE


@main.command(short_help=summary("export"))
@click.argument("source", type=_FILE)
@click.option("--out", required=True, type=OUTPUT_FILE, metavar="FILE",
              help="File to write (.bin or .onnx).")
@click.option("--format", "format_", type=click.Choice(EXPORT_FORMATS), default=None,
              help="bin: the runtime's network layout; onnx: an ONNX graph with the normalisation inside "
                   "[default: from the extension of --out, .onnx or .bin; bin for others].")
@click.option("--split", is_flag=True,
              help="ONNX only: name two outputs, 'features' (the input's width) and 'latent', not one 'output'.")
@click.option("--force", is_flag=True, help="Replace an existing FILE (never SOURCE itself).")
@reports_errors
def export(source, out, format_, split, force):
    """Export SOURCE (a projector, decompressor or stepper training checkpoint, or a network .bin) for the runtime
    or for ONNX.

    Example: mm-projector export runs/projector.pt --out projector.bin
    """
    from motion_matching.projector.export import export_network  # torch: loaded when run, not for --help
    result = export_network(source, out, format=format_, split=split, force=force, network_of=other_network)
    sizes = " -> ".join(str(size) for size in result["sizes"])
    click.echo(f"wrote {out}: {result['format']}, {sizes}, {result['bytes']} bytes, "
               f"outputs {', '.join(result['outputs'])}")


def other_network(path):
    """The network (a ``formats.Network``) of a decompressor or stepper checkpoint at ``path``, or None (a
    projector's checkpoint or a network .bin, which ``export_network`` reads itself)."""
    from motion_matching.decompressor.export import checkpoint_network as decompressor_network
    from motion_matching.stepper.export import checkpoint_network as stepper_network
    network = decompressor_network(path)
    return network if network is not None else stepper_network(path)


@main.command(short_help=summary("evaluate"))
@click.option("--projector", required=True, type=_FILE, help="Checkpoint or network .bin to evaluate.")
@click.option("--features", default="features.bin", show_default=True, type=_FILE, help="features.bin of the database.")
@click.option("--latent", default="latent.bin", show_default=True, type=_FILE, help="latent.bin of the database.")
@click.option("--out", required=True, type=OUTPUT_FOLDER, metavar="FOLDER",
              help="Folder for evaluation.json and the plots.")
@click.option("--queries", default=EVALUATION_QUERIES, show_default=True, type=click.IntRange(min=1),
              help="Held-out queries.")
@click.option("--seed", default=HELD_OUT_SEED, show_default=True, type=SEED,
              help=f"Seed of the held-out query stream (training uses {recipe.SEED}).")
@click.option("--backend", default=DEFAULT_BACKEND, show_default=True, type=click.Choice(list(BACKENDS)),
              help="Exact nearest-neighbour search.")
@click.option("--threads", type=click.IntRange(min=1), help="Threads for the search.")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Write projector_X.png and projector_Z.png.")
@click.option("--force", is_flag=True, help="Replace files of those names in FOLDER that evaluate did not write.")
@reports_errors
def evaluate(projector, features, latent, out, queries, seed, backend, threads, plots, force):
    """Evaluate a projector on held-out queries: L1 errors, loss terms and match accuracy.

    Example: mm-projector evaluate --projector projector.bin --features features.bin
    --latent latent.bin --out eval/
    """
    from motion_matching.projector.evaluate import evaluate_files  # torch: loaded when run, not for --help
    report = evaluate_files(projector, features, latent, out, nqueries=queries, seed=seed, backend=backend,
                            threads=threads, plots=plots, force=force)
    click.echo(format_report(report))


def format_report(report):
    """The lines ``evaluate`` prints for a report from ``evaluate_files``."""
    losses, match = report["losses"], report["match"]
    top_k = [key for key in match if key != "top1"][0]
    label = top_k.replace("top", "top-")
    lines = [f"{report['queries']} held-out queries (seed {report['seed']}) over {report['nframes']} frames",
             f"feature L1 {losses['feature_l1']:.4f}  latent L1 {losses['latent_l1']:.4f}  "
             f"distance L1 {losses['distance_l1']:.4f}",
             f"loss terms: xval {losses['xval']:.4f}  zval {losses['zval']:.4f}  dist {losses['dist']:.4f}  "
             f"total {losses['loss']:.4f}",
             f"match: top-1 {100 * match['top1']:.1f}%  {label} {100 * match[top_k]:.1f}%"]
    for row in report["by_noise_level"]:
        if row["queries"]:
            lines.append(f"  u {row['u_min']:.2f}-{row['u_max']:.2f}: {row['queries']:6d} queries  "
                         f"top-1 {100 * row['top1']:5.1f}%  {label} {100 * row[top_k]:5.1f}%  "
                         f"feature L1 {row['feature_l1']:.4f}")
    lines += [f"wrote {path}" for path in report["files"]]
    return "\n".join(lines)
