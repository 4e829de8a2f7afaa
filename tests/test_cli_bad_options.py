"""Every command, run with each bad value of each of its options: a usage error or one ``Error:`` line,
never a traceback. Bad values come from each option's type (below a range, not a number, NaN, a missing
file, a folder for a file, an empty or garbage file, an unknown choice) plus the known cases."""
import os
import shutil

import click
import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.cli.paths import InputFile, OutputFile, OutputFolder
from motion_matching.data import generate
from motion_matching.decompressor.config import DecompressorConfig
from motion_matching.decompressor.train import train_decompressor
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector
from motion_matching.stepper.config import StepperConfig
from motion_matching.stepper.train import train_stepper
from motion_matching.toolkit import formats

from fuzz_helpers import time_limit
from train_helpers import build_balltree_cache

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
    "train-decompressor": ["--iterations", "2", "--hidden", "16", "--threads", "1", "--quiet", "--out",
                           "trained-decompressor"],
    "evaluate-decompressor": ["--out", "evaluation-decompressor", "--no-plots"],
    "train-stepper": ["--iterations", "2", "--hidden", "16", "--threads", "1", "--quiet", "--out", "trained-stepper"],
    "evaluate-stepper": ["--windows", "10", "--out", "evaluation-stepper", "--no-plots"],
    "retrain": ["--database", "database.bin", "--out", "retrained", "--decompressor-iterations", "2",
                "--projector-iterations", "2", "--stepper-iterations", "2", "--cache-queries", "1024", "--threads", "1",
                "--quiet"],
}
STRING_VALUES = {"--device": ["bogus", "cuda:99"], "--weights": ["1,2", "1,1,1,1,-1", "x,1,1,1,1"],
                 "--window": ["x"], "--out": ["features.bin/inside"], "--tensorboard": ["features.bin"],
                 "--database": ["garbage.bin"]}
KNOWN_CASES = [("generate-database", ["--nlatent", "500"]),
               ("build-cache", ["--backend", "balltree", "--device", "cuda"]),
               ("generate-database", ["--database", "database.bin", "--latent", "garbage.bin"]),
               ("generate-database", ["--plot", "missing/plot.png"]),
               ("train", ["--offline", "cache.h5"]), ("train", ["--resume", "garbage.bin"]),
               ("export", ["projector.bin", "--out", "exported.onnx", "--format", "onnx", "--split"]),
               ("evaluate-decompressor", ["--decompressor", "stepper.bin"]),
               ("evaluate-decompressor", ["--decompressor", "projector.bin"]),
               ("evaluate-stepper", ["--stepper", "decompressor.bin"]),
               ("evaluate-stepper", ["--decompressor", "stepper.bin"]),
               ("retrain", ["--cache-queries", "1023"]),  # fewer than one batch of the projector's recipe
               ("retrain", ["--projector-recipe", "toolkit", "--cache-queries", "31"])]
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
    """A folder with small valid toolkit files, a cache, a checkpoint and the three networks, and bad files."""
    return make_inputs(tmp_path_factory.mktemp("inputs"))


def make_inputs(folder):
    """Write into ``folder`` (a pathlib.Path) what the ``inputs`` fixture holds; returns ``folder``."""
    files = generate.generate_files(folder, nframes=400)  # database.bin, features.bin, a stand-in latent.bin
    database_path, features_path, latent_path = files["database"], files["features"], files["latent"]
    train_decompressor(DecompressorConfig(iterations=2, hidden=16, threads=1), database_path=database_path,
                       features_path=features_path, out_dir=folder / "decompressor_run")
    for name in ("decompressor.bin", "latent.bin"):  # the latent.bin that decompressor.bin decodes
        shutil.copyfile(folder / "decompressor_run" / name, folder / name)
    train_stepper(StepperConfig(iterations=2, hidden=16, threads=1), database_path=database_path,
                  features_path=features_path, latent_path=latent_path, out_dir=folder)
    build_balltree_cache(folder / "cache.h5", features_path, nqueries=300)
    train_projector(TrainConfig(iterations=2, hidden=16, hidden_layers=1), features_path=features_path,
                    latent_path=latent_path, out_dir=folder, held_out_queries=0)
    (folder / "folder").mkdir()
    (folder / "empty.bin").write_bytes(b"")
    (folder / "garbage.bin").write_bytes(b"\x07" * 100)
    (folder / "notes.txt").write_text("my notes\n")
    for name in ("projector.bin", "decompressor.bin", "stepper.bin"):
        formats.load_network(folder / name)
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


@pytest.mark.parametrize("extra, recipe, batch", [([], "fast", "1,024"), (["--projector-recipe", "toolkit"],
                                                                          "toolkit", "32")], ids=["fast", "toolkit"])
def test_retrain_refuses_a_cache_smaller_than_one_batch_before_anything_runs(inputs, monkeypatch, extra, recipe,
                                                                            batch, tmp_path):
    monkeypatch.chdir(inputs)
    out = tmp_path / "retrained"
    result = CliRunner().invoke(main, ["retrain"] + BASE["retrain"] + extra + ["--cache-queries", "31", "--out",
                                                                               str(out)], prog_name="mm-projector")
    assert result.exit_code == 2
    assert result.output == (f"Error: Invalid value for '--cache-queries': 31 is fewer than one batch of the "
                             f"projector's '{recipe}' recipe; give at least {batch} (see 'mm-projector retrain "
                             f"--help')\n")
    assert not out.exists()  # refused before the folder, retrain.json or any stage's file


# what each input file must be, by parameter name, as the line names it ("not a features.bin")
EXPECTED_KIND = {"features": "a features.bin", "features_path": "a features.bin", "latent": "a latent.bin",
                 "latent_path": "a latent.bin", "database": "a database.bin", "database_path": "a database.bin",
                 "cache_path": "a projector cache (HDF5)", "offline_cache": "a projector cache (HDF5)",
                 "resume": "a training checkpoint (.pt)", "source": "a network .bin", "projector": "a network .bin",
                 "decompressor_path": "a network .bin", "stepper_path": "a network .bin",
                 "bvh": "a BVH text file"}
CACHES = {"cache_path", "offline_cache"}  # their lines go on with the command that builds the cache
NEEDED_WITH = {("build-cache", "database_path"): ["--exact-toolkit", "--queries", "320"]}  # read only then


def path_cases(kind):
    """(command, arguments with "VALUE" for the path, parameter) for each parameter of click type ``kind``."""
    context = click.Context(main)
    found = []
    for name, base in BASE.items():
        for parameter in main.get_command(context, name).params:
            if not isinstance(parameter.type, kind):
                continue
            if isinstance(parameter, click.Argument):  # each command's argument comes first in BASE
                found.append((name, ["VALUE"] + base[1:], parameter))
            else:
                extra = NEEDED_WITH.get((name, parameter.name), [])
                found.append((name, base + extra + [parameter.opts[0], "VALUE"], parameter))
    return found


def case_id(value):
    return value.name if isinstance(value, click.Parameter) else " ".join(value) if isinstance(value, list) else value


BASE_OUTPUTS = ("generated", "trained", "evaluation", "demo", "built.h5", "exported.bin", "trained-decompressor",
                "evaluation-decompressor", "trained-stepper", "evaluation-stepper", "retrained")  # what BASE writes


def run_with(folder, monkeypatch, command, arguments, value, env=None):
    """The result of ``command`` run in ``folder`` with "VALUE" in ``arguments`` replaced by ``value``, after
    removing what earlier runs of BASE wrote (an existing output is refused, and may be refused first)."""
    monkeypatch.chdir(folder)
    for path in map(folder.joinpath, BASE_OUTPUTS):
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    with time_limit(120):
        return CliRunner().invoke(main, [command] + [value if word == "VALUE" else word for word in arguments],
                                  env=env)


def last_line(result):
    return result.output.strip().splitlines()[-1]


def assert_line(result, expected, parameter):
    """Exit 1 and ``expected`` as the last line (for a cache, ``expected`` then its build command)."""
    assert result.exit_code == 1, result.output
    line = last_line(result)
    if parameter.name in CACHES and line != expected:
        assert line.startswith(expected + "; run: mm-projector build-cache "), line
    else:
        assert line == expected


@pytest.mark.parametrize("value, problem", [("missing.bin", "no such file"), ("folder", "is a folder, not a file")])
@pytest.mark.parametrize("command, arguments, parameter", path_cases(InputFile), ids=case_id)
def test_a_missing_input_or_a_folder_is_the_same_line_in_every_command(inputs, monkeypatch, command, arguments,
                                                                       parameter, value, problem):
    result = run_with(inputs, monkeypatch, command, arguments, value)
    assert_line(result, f"Error: {value}: {problem}", parameter)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a file of mode 000")
@pytest.mark.parametrize("command, arguments, parameter", path_cases(InputFile), ids=case_id)
def test_an_unreadable_input_is_the_same_line_in_every_command(inputs, monkeypatch, command, arguments, parameter):
    locked = inputs / "locked.bin"
    locked.write_bytes((inputs / "features.bin").read_bytes())
    locked.chmod(0)
    try:
        result = run_with(inputs, monkeypatch, command, arguments, "locked.bin")
    finally:
        locked.chmod(0o644)
    assert_line(result, "Error: locked.bin: permission denied", parameter)


@pytest.mark.parametrize("command, arguments, parameter", path_cases(InputFile), ids=case_id)
def test_an_empty_input_says_so_in_every_command(inputs, monkeypatch, command, arguments, parameter):
    (inputs / "empty.bin").write_bytes(b"")  # afresh: the matrix above may have written into it (--out empty.bin)
    result = run_with(inputs, monkeypatch, command, arguments, "empty.bin")
    assert_line(result, f"Error: empty.bin: is an empty file, not {EXPECTED_KIND[parameter.name]}", parameter)


@pytest.mark.parametrize("command, arguments, parameter", [case for case in path_cases(InputFile)
                                                           if case[2].name != "bvh"], ids=case_id)
def test_a_text_file_as_a_binary_input_says_so_in_every_command(inputs, monkeypatch, command, arguments, parameter):
    (inputs / "notes.txt").write_text("my notes\n")
    result = run_with(inputs, monkeypatch, command, arguments, "notes.txt")
    assert_line(result, f"Error: notes.txt: is a text file, not {EXPECTED_KIND[parameter.name]}", parameter)


@pytest.mark.parametrize("command, arguments, parameter", path_cases(OutputFolder), ids=case_id)
def test_a_file_given_for_a_folder_is_the_same_line_in_every_command(inputs, monkeypatch, command, arguments,
                                                                     parameter):
    (inputs / "notes.txt").write_text("my notes\n")
    result = run_with(inputs, monkeypatch, command, arguments, "notes.txt")
    option = parameter.opts[0]
    assert_line(result, f"Error: notes.txt: is a file but this {option} names a folder (files are written into "
                        f"it); choose another {option}", parameter)
    assert (inputs / "notes.txt").read_text() == "my notes\n"


@pytest.mark.parametrize("command, arguments, parameter", path_cases(OutputFile), ids=case_id)
def test_a_folder_given_for_a_file_to_write_is_the_same_line_in_every_command(inputs, monkeypatch, command,
                                                                              arguments, parameter):
    result = run_with(inputs, monkeypatch, command, arguments, "folder")
    option = parameter.opts[0]
    assert_line(result, f"Error: folder: is a folder but this {option} names a file to write; choose another "
                        f"{option}", parameter)
