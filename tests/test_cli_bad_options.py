"""Every command, run with each bad value of each of its options: a usage error or one ``Error:`` line,
never a traceback. Bad values come from each option's type (below a range, not a number, NaN, a missing
file, a folder for a file, an empty or garbage file, an unknown choice) plus the known cases."""
import click
import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector
from motion_matching.toolkit import formats

from conftest import write_small_toolkit_files
from fuzz_helpers import time_limit
from train_helpers import build_balltree_cache, write_database

# a quick valid run of each command, in the folder ``inputs`` makes; each case changes one option
BASE = {
    "generate-database": ["--frames", "300", "--out", "generated"],
    "check-files": ["--features", "features.bin"],
    "build-cache": ["--features", "features.bin", "--queries", "300", "--out", "built.h5", "--backend", "balltree",
                    "--quiet"],
    "cache-info": ["cache.h5"],
    "verify-cache": ["cache.h5", "--features", "features.bin", "--sample", "10"],
    "train": ["--database", "", "--iterations", "3", "--hidden", "16", "--hidden-layers", "1", "--held-out", "0",
              "--quiet", "--out", "trained"],
    "export": ["projector.bin", "--out", "exported.bin"],
    "evaluate": ["--projector", "projector.bin", "--features", "features.bin", "--latent", "latent.bin", "--out",
                 "evaluation", "--queries", "50", "--no-plots"],
    "demo": ["--out", "demo", "--frames", "1000", "--iterations", "2"],
}
STRING_VALUES = {"--device": ["bogus", "cuda:99"], "--weights": ["1,2", "1,1,1,1,-1", "x,1,1,1,1"],
                 "--window": ["x"], "--out": ["features.bin/inside"], "--tensorboard": ["features.bin"],
                 "--database": ["garbage.bin"]}
KNOWN_CASES = [("generate-database", ["--nlatent", "500"]),
               ("build-cache", ["--backend", "balltree", "--device", "cuda"]),
               ("generate-database", ["--database", "database.bin", "--latent", "garbage.bin"]),
               ("generate-database", ["--plot", "missing/plot.png"]),
               ("train", ["--offline", "cache.h5"]), ("train", ["--resume", "garbage.bin"]),
               ("export", ["projector.bin", "--out", "exported.onnx", "--format", "onnx", "--split"])]
PATH_VALUES = ["missing/none.bin", "folder", "empty.bin", "garbage.bin"]


def bad_values(option):
    """Values (list of str) that ``option`` (a click.Option) should refuse without a traceback."""
    kind = option.type
    name = option.opts[0]
    if option.is_flag:
        return []
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        low = kind.min if kind.min is not None else 0
        return [str(low - 1), "x"] + (["nan"] if isinstance(kind, click.FloatRange) else [])
    if kind == click.INT:
        return ["x", "-1"] + (["99999999999999999999"] if "seed" in name else [])
    if kind == click.FLOAT:
        return ["x", "nan", "inf", "-1"]
    if isinstance(kind, click.Choice):
        return ["bogus"]
    if isinstance(kind, click.Path):
        return PATH_VALUES if kind.dir_okay is False else ["features.bin"]
    return STRING_VALUES.get(name, [])


def cases():
    """(command, arguments) for every bad value of every option of every command, and the known cases."""
    context = click.Context(main)
    found = []
    for name, base in BASE.items():
        command = main.get_command(context, name)
        for parameter in command.params:
            if not isinstance(parameter, click.Option) or parameter.opts[0] in ("--help",):
                continue
            for value in bad_values(parameter):
                found.append((name, base + [parameter.opts[0], value]))
    return found + [(name, BASE[name] + extra) for name, extra in KNOWN_CASES]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A folder with small valid toolkit files, a cache, a checkpoint and projector.bin, and bad files."""
    folder = tmp_path_factory.mktemp("inputs")
    features_path, latent_path = write_small_toolkit_files(folder, nframes=400)
    write_database(folder / "database.bin", 400)
    build_balltree_cache(folder / "cache.h5", features_path, nqueries=300)
    train_projector(TrainConfig(iterations=2, hidden=16, hidden_layers=1), features_path=features_path,
                    latent_path=latent_path, out_dir=folder, held_out_queries=0)
    (folder / "folder").mkdir()
    (folder / "empty.bin").write_bytes(b"")
    (folder / "garbage.bin").write_bytes(b"\x07" * 100)
    formats.load_network(folder / "projector.bin")
    return folder


@pytest.mark.parametrize("command, arguments", cases(), ids=lambda value: " ".join(value) if isinstance(
    value, list) else value)
def test_bad_option_values_never_show_a_traceback(inputs, monkeypatch, command, arguments):
    monkeypatch.chdir(inputs)
    with time_limit(120):
        result = CliRunner().invoke(main, [command] + arguments)
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    if result.exit_code:
        assert result.output.strip().splitlines()[-1].startswith("Error: "), result.output


def test_generate_database_refuses_too_many_latent_columns_before_writing_anything(tmp_path):
    result = CliRunner().invoke(main, ["generate-database", "--frames", "300", "--nlatent", "500", "--out",
                                       str(tmp_path / "out")])
    assert result.exit_code == 1
    assert result.output.startswith("Error: --nlatent: must be between 1 and ")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_generate_database_leaves_the_previous_set_whole_when_it_fails(tmp_path):
    out = tmp_path / "out"
    assert CliRunner().invoke(main, ["generate-database", "--frames", "300", "--out", str(out)]).exit_code == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    result = CliRunner().invoke(main, ["generate-database", "--frames", "400", "--nlatent", "500", "--out", str(out)])
    assert result.exit_code == 1
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before


def test_a_cpu_only_backend_on_cuda_is_one_line(inputs, monkeypatch):
    monkeypatch.chdir(inputs)
    result = CliRunner().invoke(main, ["build-cache"] + BASE["build-cache"][:-1] + ["--device", "cuda", "--quiet"])
    assert result.exit_code == 1
    assert result.output == ("Error: --device: backend 'balltree' runs on the CPU only; pass --device cpu, or "
                             "--backend torch for cuda\n")
