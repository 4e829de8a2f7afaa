"""No command writes over a file it did not write without --force, some never even with it, and no rebuild
command that an error suggests would do so: each refusal is one line, exit 1, and the file keeps its bytes."""
import hashlib
import json
import os
import shlex
import zipfile

import h5py
import pytest
from click.testing import CliRunner

from motion_matching.cache.targets import not_a_cache
from motion_matching.cli import main
from motion_matching.data.generate import write_toolkit_files
from motion_matching.data.synthetic import locomotion
from motion_matching.toolkit import formats
from motion_matching.toolkit.sniff import file_kind

from conftest import TOOLKIT_NETWORKS, needs_torch

NEVER = "build-cache never replaces it (choose another --out)"
ONNX_BYTES = b"\x08\x08\x12\x07pytorch\x1a\x052.13.0" + bytes(64)  # a ModelProto's first fields


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def toolkit(tmp_path_factory):
    """A folder with a 600-frame synthetic database.bin, features.bin, latent.bin, the toolkit's projector.bin,
    a zip archive shaped like a checkpoint, an ONNX model's first bytes and a text file."""
    folder = tmp_path_factory.mktemp("toolkit")
    write_toolkit_files(folder, locomotion.generate_synthetic_database(seed=0, nframes=600))
    (folder / "projector.bin").write_bytes((TOOLKIT_NETWORKS / "projector.bin").read_bytes())
    with zipfile.ZipFile(folder / "run.pt", "w") as archive:
        archive.writestr("run/data.pkl", b"not a real checkpoint")
    (folder / "model.onnx").write_bytes(ONNX_BYTES)
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "empty.bin").write_bytes(b"")
    return folder


@pytest.fixture
def files(toolkit, tmp_path, monkeypatch):
    """A private copy of ``toolkit`` as the current folder; returns {name: SHA-256} of its files."""
    for path in toolkit.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    monkeypatch.chdir(tmp_path)
    return {path.name: sha256(path) for path in tmp_path.iterdir()}


def assert_unchanged(digests):
    """Every file of ``digests`` keeps its bytes, and nothing else appeared (no .lock, .partial, cache)."""
    assert {name: sha256(name) for name in os.listdir(".")} == digests


def suggested_build(line):
    """The words of the build-cache command at the end of the one-line error ``line``."""
    assert "; run: mm-projector build-cache " in line, line
    return shlex.split(line.split("; run: ", 1)[1])


KINDS = {"features.bin": "a features.bin (600 frames x 27 features)",
         "latent.bin": "a latent.bin (600 frames x 32 columns)",
         "database.bin": "a database.bin (600 frames x 23 bones)",
         "projector.bin": "a network .bin (27 inputs, 5 layers, 59 outputs)",
         "run.pt": "a zip archive (a training checkpoint, for example)",
         "model.onnx": "an ONNX model", "notes.txt": "a text file", "empty.bin": "an empty file"}


@pytest.mark.parametrize("command", ["cache-info", "verify-cache"])
@pytest.mark.parametrize("victim", sorted(KINDS))
def test_a_rebuild_hint_about_a_non_cache_names_a_new_cache_without_force(files, command, victim):
    result = invoke(command, victim, "--features", "features.bin")
    assert result.exit_code == 1
    # what the file is called is the wrong-file messages' business; which file the hint writes is this test's
    assert result.output.startswith(f"Error: {victim}: ") and result.output.count("\n") == 1
    assert result.output.endswith("; run: mm-projector build-cache --features features.bin --out projector_cache.h5 "
                                  "--queries 16000000 --seed 1234\n")
    assert_unchanged(files)


def test_a_hint_skips_a_default_name_that_is_not_a_cache_either(files):
    os.replace("latent.bin", "projector_cache.h5")  # a latent.bin under the cache's default name
    result = invoke("cache-info", "projector_cache.h5", "--features", "features.bin")
    assert result.exit_code == 1
    words = suggested_build(result.output)
    assert words[words.index("--out") + 1] == "projector_cache_2.h5" and "--force" not in words


def test_following_the_hint_of_train_offline_features_bin_builds_a_cache_and_keeps_features_bin(files):
    needs_torch()
    result = invoke("train", "--offline", "features.bin", "--out", "run", "--iterations", 2, "--quiet")
    assert result.exit_code == 1
    words = suggested_build(result.output.splitlines()[-1])
    assert words[words.index("--out") + 1] == "projector_cache.h5" and "--force" not in words
    words[words.index("--queries") + 1] = "4096"  # the same command, smaller
    result = invoke(*words[1:])
    assert result.exit_code == 0, result.output
    assert sha256("features.bin") == files["features.bin"]
    assert not_a_cache("projector_cache.h5") is None and not os.path.exists("run")


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["", "force"])
@pytest.mark.parametrize("out", ["features.bin", "./features.bin", "link.h5", "hard.h5"])
def test_build_cache_never_writes_over_its_features(files, out, force):
    os.symlink("features.bin", "link.h5")
    os.link("features.bin", "hard.h5")
    digests = dict(files, **{"link.h5": files["features.bin"], "hard.h5": files["features.bin"]})
    result = invoke("build-cache", "--features", "features.bin", "--out", out, "--queries", 4096, *force)
    assert result.exit_code == 1
    assert result.output == f"Error: {out}: is the --features file, not a cache; {NEVER}\n"
    assert_unchanged(digests)


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["", "force"])
@pytest.mark.parametrize("victim", sorted(set(KINDS) - {"features.bin"}))
def test_build_cache_never_writes_over_a_file_that_cannot_be_a_cache(files, victim, force):
    result = invoke("build-cache", "--features", "features.bin", "--out", victim, "--queries", 4096, *force)
    assert result.exit_code == 1
    assert result.output == f"Error: {victim}: is {KINDS[victim]}, not a cache; {NEVER}\n"
    assert_unchanged(files)


@pytest.mark.parametrize("damaged", [b"not a cache", b"", bytes(100)], ids=["text", "empty", "zeros"])
def test_build_cache_still_replaces_a_damaged_cache_with_force(files, damaged):
    with open("cache.h5", "wb") as stream:
        stream.write(damaged)
    result = invoke("build-cache", "--features", "features.bin", "--out", "cache.h5", "--queries", 4096)
    assert result.exit_code == 1
    words = suggested_build(result.output)
    assert words[words.index("--out") + 1] == "cache.h5" and words[-1] == "--force"  # it may be a cache
    result = invoke(*words[1:])
    assert result.exit_code == 0, result.output
    assert h5py.is_hdf5("cache.h5")
    assert {name: sha256(name) for name in files} == files


@pytest.fixture
def checkpoint(files):
    """A real training checkpoint run.pt in the current folder (needs torch); returns its SHA-256."""
    needs_torch()
    from export_helpers import random_projector, write_checkpoint
    write_checkpoint("run.pt", random_projector(hidden=16))
    files["run.pt"] = sha256("run.pt")
    return files


@pytest.mark.parametrize("victim", ["latent.bin", "database.bin", "projector.bin", "notes.txt", "model.onnx"])
def test_export_replaces_an_existing_file_only_with_force(checkpoint, victim):
    format_ = ["--format", "onnx"] if victim.endswith(".onnx") else []
    result = invoke("export", "run.pt", "--out", victim, *format_)
    assert result.exit_code == 1
    assert result.output == f"Error: {victim}: exists and is {KINDS[victim]}; pass --force to replace it\n"
    assert_unchanged(checkpoint)
    if format_:
        pytest.importorskip("onnx", reason="replacing it needs the optional [onnx] extra")
    result = invoke("export", "run.pt", "--out", victim, *format_, "--force")
    assert result.exit_code == 0, result.output
    assert sha256(victim) != checkpoint[victim] and sha256("run.pt") == checkpoint["run.pt"]


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["", "force"])
@pytest.mark.parametrize("source, out", [("projector.bin", "projector.bin"), ("projector.bin", "./projector.bin"),
                                         ("projector.bin", "link.bin"), ("run.pt", "link.onnx")])
def test_export_never_writes_over_its_source(checkpoint, source, out, force):
    os.symlink(source, out) if out.startswith("link") else None
    digests = dict(checkpoint, **({out: checkpoint[source]} if out.startswith("link") else {}))
    result = invoke("export", source, "--out", out, *force)
    assert result.exit_code == 1
    assert result.output == (f"Error: {out}: is the source of this export; export never writes over it (choose "
                             "another --out)\n")
    assert_unchanged(digests)


@pytest.mark.parametrize("out, format_", [("run.pt", []), ("new.pt", []), ("new.pth", ["--format", "bin"])])
def test_export_does_not_write_checkpoints(checkpoint, out, format_):
    result = invoke("export", "run.pt", "--out", out, *format_, "--force")
    assert result.exit_code == 1
    extension = out[out.index("."):]
    assert result.output == (f"Error: {out}: export writes a network .bin or ONNX, not a checkpoint; name the file "
                             f"*.bin or *.onnx, not *{extension}\n")
    assert_unchanged(checkpoint)


def generate(*arguments):
    return invoke("generate-database", "--frames", 600, "--nlatent", 32, *arguments)


TOOLKIT_FILES = ("database.bin", "features.bin", "latent.bin")


@pytest.mark.parametrize("present", [TOOLKIT_FILES, ("features.bin", "latent.bin"), ("latent.bin",)],
                         ids=["all", "two", "one"])
def test_generate_database_refuses_toolkit_files_in_the_default_out_without_force(files, present):
    for name in set(TOOLKIT_FILES) - set(present):
        os.remove(name)
        del files[name]
    result = generate()
    assert result.exit_code == 1
    also = {3: ", as do features.bin and latent.bin", 2: ", as does latent.bin", 1: ""}[len(present)]
    assert result.output == (f"Error: ./{present[0]}: exists{also}; pass --force to replace "
                             f"{'them' if also else 'it'}, or choose another --out\n")
    assert_unchanged(files)


def test_generate_database_replaces_them_with_force(files):
    result = generate("--seed", 5, "--force")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"wrote {name}: ./{name}.bin" for name in ("database", "features", "latent")]
    assert all(sha256(name) != files[name] for name in TOOLKIT_FILES)
    assert formats.load_database("database.bin").nframes == 600


@pytest.mark.parametrize("spelling", ["database.bin", "./database.bin", "absolute"])
def test_generate_database_recomputes_beside_its_own_database_and_never_rewrites_it(files, spelling):
    database = os.path.abspath("database.bin") if spelling == "absolute" else spelling
    before = os.stat("database.bin")
    os.remove("features.bin")  # recomputed: the same bytes as before; latent.bin is replaced in place
    result = invoke("generate-database", "--database", database, "--out", ".")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["wrote features: ./features.bin", "wrote latent: ./latent.bin",
                                          f"recomputed features.bin and latent.bin from {database} (kept as it is)"]
    after = os.stat("database.bin")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert {name: sha256(name) for name in os.listdir(".")} == files


def test_generate_database_from_another_database_refuses_the_files_in_out(files, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    write_toolkit_files(other, locomotion.generate_synthetic_database(seed=3, nframes=600))
    result = invoke("generate-database", "--database", other / "database.bin")
    assert result.exit_code == 1
    assert result.output == ("Error: ./features.bin: exists, as does latent.bin; pass --force to replace them, or "
                             "choose another --out\n")
    assert_unchanged(files)
    os.remove("features.bin")  # a latent.bin that is the --latent given is kept, not replaced
    result = invoke("generate-database", "--database", other / "database.bin", "--latent", "latent.bin")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (f"recomputed features.bin from {other / 'database.bin'} (kept as it "
                                              "is)")
    assert sha256("latent.bin") == files["latent.bin"] and sha256("database.bin") == files["database.bin"]


def png(path, *, software=None):
    """Write a small PNG at ``path`` (matplotlib), tagged ``Software: software`` when given."""
    matplotlib = pytest.importorskip("matplotlib", reason="the plots are written with matplotlib")
    matplotlib.use("Agg")
    from matplotlib import pyplot
    figure = pyplot.figure(figsize=(1, 1))
    figure.savefig(path, format="png", metadata={"Software": software} if software else None)
    pyplot.close(figure)


def digests_of(folder="."):
    """{relative path: SHA-256} of every file under ``folder``."""
    return {os.path.relpath(os.path.join(root, name), folder): sha256(os.path.join(root, name))
            for root, _, names in os.walk(folder) for name in names}


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["", "force"])
def test_generate_database_replaces_an_existing_plot_only_with_force(files, force):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib")
    result = generate("--out", "new", "--plot", "notes.txt", *force)
    if not force:
        assert result.exit_code == 1
        assert result.output == "Error: notes.txt: exists; pass --force to replace it, or choose another --plot\n"
        assert_unchanged(files)  # refused before anything is written: no new/ either
        return
    assert result.exit_code == 0, result.output
    assert open("notes.txt", "rb").read(8) == b"\x89PNG\r\n\x1a\n" and len(os.listdir("new")) == 3


@pytest.mark.parametrize("present, also", [(1, ""), (2, ", as does range_001.bvh"),
                                           (4, ", as do range_001.bvh and 2 more")])
def test_generate_database_replaces_existing_bvh_files_only_with_force(files, present, also):
    os.mkdir("bvh")
    for index in range(present):  # the 600-frame database has 4 ranges: range_000.bvh ... range_003.bvh
        with open(f"bvh/range_{index:03d}.bvh", "w") as stream:
            stream.write(f"my clip {index}\n")
    before = digests_of()
    result = generate("--out", "new", "--write-bvh", "bvh")
    assert result.exit_code == 1
    them = "them" if also else "it"
    assert result.output == (f"Error: bvh/range_000.bvh: exists{also}; pass --force to replace {them}, or choose "
                             "another --write-bvh\n")
    assert digests_of() == before
    result = generate("--out", "new", "--write-bvh", "bvh", "--force")
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir("bvh")) == [f"range_{index:03d}.bvh" for index in range(4)]
    assert all(sha256(f"bvh/range_{index:03d}.bvh") != before[f"bvh/range_{index:03d}.bvh"] for index in range(present))


def test_generate_database_never_writes_over_its_own_inputs(files):
    from motion_matching.data.bvh.exporter import write_database_bvh
    write_database_bvh(formats.load_database("database.bin"), "clips", ranges=[0])
    before = digests_of()
    result = invoke("generate-database", "--bvh", "clips/range_000.bvh", "--out", "new", "--write-bvh", "clips",
                    "--force")
    assert result.exit_code == 1
    assert result.output == ("Error: clips/range_000.bvh: is an input of this run (--bvh); generate-database never "
                             "writes over it (choose another --write-bvh)\n")
    result = invoke("generate-database", "--database", "database.bin", "--plot", "./database.bin", "--force")
    assert result.exit_code == 1
    assert result.output == ("Error: ./database.bin: is an input of this run (--database); generate-database never "
                             "writes over it (choose another --plot)\n")
    assert digests_of() == before


def evaluate_into(out, *arguments):
    return invoke("evaluate", "--projector", "projector.bin", "--out", out, "--queries", 200, *arguments)


EVALUATION_VICTIMS = {"text": ("evaluation.json", lambda path: open(path, "w").write("my notes\n")),
                      "json": ("evaluation.json", lambda path: open(path, "w").write('{"top1": 0.31}\n')),
                      "png": ("projector_X.png", png),
                      "train's png": ("projector_Z.png", lambda path: png(path, software="mm-projector train"))}


@pytest.mark.parametrize("victim", sorted(EVALUATION_VICTIMS))
def test_evaluate_replaces_only_its_own_files_without_force(files, victim):
    needs_torch()
    name, write = EVALUATION_VICTIMS[victim]
    os.mkdir("eval")
    write(os.path.join("eval", name))
    before = digests_of()
    result = evaluate_into("eval")
    assert result.exit_code == 1
    assert result.output == (f"Error: {os.path.join('eval', name)}: exists (not written by evaluate); pass --force "
                             "to replace it, or choose another --out\n")
    assert digests_of() == before
    assert evaluate_into("eval", "--force").exit_code == 0
    assert sha256(os.path.join("eval", name)) != before[os.path.join("eval", name)]
    again = evaluate_into("eval")  # its own files, from the run just made: replaced without asking
    assert again.exit_code == 0, again.output


def test_evaluate_names_the_first_of_several_files_it_did_not_write(files):
    needs_torch()
    os.mkdir("eval")
    for name in ("evaluation.json", "projector_X.png", "projector_Z.png"):
        open(os.path.join("eval", name), "w").write("mine\n")
    before = digests_of()
    result = evaluate_into("eval")
    assert result.exit_code == 1
    assert result.output == (f"Error: {os.path.join('eval', 'evaluation.json')}: exists, as do projector_X.png and "
                             "projector_Z.png (not written by evaluate); pass --force to replace them, or choose "
                             "another --out\n")
    assert digests_of() == before
    assert evaluate_into("eval", "--no-plots").exit_code == 1  # the report alone is still not evaluate's


def train_into(out, *arguments):
    return invoke("train", "--features", "features.bin", "--latent", "latent.bin", "--out", out, "--iterations", 2,
                  "--batch-size", 8, "--hidden", 16, "--save-every", 1, "--quiet", *arguments)


def test_train_plots_replace_only_trainings_own_without_force(files):
    needs_torch()
    pytest.importorskip("matplotlib", reason="--plots needs matplotlib")
    os.mkdir("run")
    png(os.path.join("run", "projector_X.png"), software="mm-projector evaluate")
    before = digests_of()
    result = train_into("run", "--plots")
    assert result.exit_code == 1
    assert result.output == (f"Error: {os.path.join('run', 'projector_X.png')}: exists (not written by train); pass "
                             "--force to replace it, or choose another --out\n")
    assert digests_of() == before  # refused before training: no checkpoint, no projector.bin
    assert train_into("run", "--plots", "--force").exit_code == 0
    assert sha256(os.path.join("run", "projector_X.png")) != before[os.path.join("run", "projector_X.png")]
    longer = train_into("run", "--plots", "--iterations", 4)  # its own plots: continued without asking
    assert longer.exit_code == 0, longer.output


def test_train_tensorboard_adds_files_beside_a_users_own(files):
    needs_torch()
    pytest.importorskip("tensorboard", reason="--tensorboard needs the optional tensorboard package")
    os.mkdir("logs")
    open(os.path.join("logs", "notes.txt"), "w").write("mine\n")
    before = digests_of("logs")
    assert train_into("run", "--tensorboard", "logs").exit_code == 0
    after = digests_of("logs")
    assert {name: after[name] for name in before} == before and len(after) > len(before)


def test_export_split_replaces_an_existing_file_only_with_force(checkpoint):
    result = invoke("export", "run.pt", "--out", "notes.txt", "--format", "onnx", "--split")
    assert result.exit_code == 1
    assert result.output == "Error: notes.txt: exists and is a text file; pass --force to replace it\n"
    assert_unchanged(checkpoint)


DEMO = ["--frames", 1000, "--iterations", 4, "--recipe", "toolkit"]


def test_demo_force_reaches_the_export_and_the_evaluation_and_refuses_before_training(files):
    needs_torch()
    pytest.importorskip("onnx", reason="the demo exports ONNX only with the optional [onnx] extra")
    os.makedirs(os.path.join("demo", "evaluation"))
    open(os.path.join("demo", "projector.onnx"), "w").write("my notes\n")
    open(os.path.join("demo", "evaluation", "evaluation.json"), "w").write("my notes\n")
    before = digests_of()
    result = invoke("demo", "--out", "demo", *DEMO)
    assert result.exit_code == 1
    onnx_path = os.path.join("demo", "projector.onnx")
    assert result.stderr == f"Error: {onnx_path}: exists and is a text file; pass --force to replace it\n"
    os.remove(onnx_path)
    del before[onnx_path]
    result = invoke("demo", "--out", "demo", *DEMO)
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {os.path.join('demo', 'evaluation', 'evaluation.json')}: exists (not written "
                             "by evaluate); pass --force to replace it, or choose another --out\n")
    assert digests_of() == before  # refused before anything was generated, built or trained
    open(onnx_path, "w").write("my notes\n")
    result = invoke("demo", "--out", "demo", *DEMO, "--force")
    assert result.exit_code == 0, result.output
    assert file_kind(onnx_path) == "an ONNX model"
    with open(os.path.join("demo", "evaluation", "evaluation.json")) as stream:
        assert json.load(stream)["format"] == "motion-matching-projector-evaluation"


def demo_work_folder_refusal():
    """The line of a demo whose --out holds a ``retrain/`` folder that no retrain.json beside it records."""
    return (f"Error: {os.path.join('demo', 'retrain/')}: was not written by retrain (the toolkit's own files?), and "
            "retrain writes these names; pass --force to replace it, or choose another --out\n")


def test_demo_never_builds_its_cache_over_a_toolkit_file_and_says_so_before_writing(files):
    needs_torch()
    os.makedirs(os.path.join("demo", "retrain"))  # the pipeline's work folder, where its cache lives
    cache = os.path.join("demo", "retrain", "projector_cache.h5")
    os.replace("latent.bin", cache)
    del files["latent.bin"]
    before = digests_of()
    result = invoke("demo", "--out", "demo", *DEMO)
    assert result.exit_code == 1
    assert result.stderr == demo_work_folder_refusal()
    result = invoke("demo", "--out", "demo", *DEMO, "--force")  # --force reaches the folder, never a toolkit file
    assert result.exit_code == 1
    assert result.stderr == f"Error: {cache}: is {KINDS['latent.bin']}, not a cache; {NEVER}\n"
    assert digests_of() == before


def test_demo_replaces_text_in_its_cache_only_with_force_and_says_so_before_writing(files):
    needs_torch()
    os.makedirs(os.path.join("demo", "retrain"))
    cache = os.path.join("demo", "retrain", "projector_cache.h5")
    open(cache, "w").write("my notes\n")
    before = digests_of()
    result = invoke("demo", "--out", "demo", *DEMO)
    assert result.exit_code == 1
    assert result.stderr == demo_work_folder_refusal()
    assert digests_of() == before
    result = invoke("demo", "--out", "demo", *DEMO, "--force")  # it may be a damaged cache, as build-cache says
    assert result.exit_code == 0, result.output
    assert h5py.is_hdf5(cache)


def test_demo_refuses_the_toolkits_projector_bin_before_writing(files):
    needs_torch()
    os.mkdir("demo")
    os.replace("projector.bin", os.path.join("demo", "projector.bin"))  # the toolkit's, as in its resources/
    before = digests_of()
    result = invoke("demo", "--out", "demo", *DEMO)
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {os.path.join('demo', 'projector.bin')}: was not written by retrain (the "
                             "toolkit's own files?), and retrain writes these names; pass --force to replace it, or "
                             "choose another --out\n")
    assert digests_of() == before
