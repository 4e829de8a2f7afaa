"""mm-projector retrain: every stage from database.bin, make-like reruns, continuing after Ctrl-C, and the
toolkit's resources/ folder (its files refused without --force, the runtime's network shapes kept)."""
import hashlib
import json
import pathlib
import shutil

import numpy as np
import pytest

pytest.importorskip("torch", reason="retrain trains the three networks with torch")

from click.testing import CliRunner  # noqa: E402

from motion_matching.cli import main  # noqa: E402
from motion_matching.data.generate import write_toolkit_files  # noqa: E402
from motion_matching.data.synthetic import locomotion as synthetic  # noqa: E402
from motion_matching.pipeline.run import STAGES, run_retrain  # noqa: E402
from motion_matching.pipeline.settings import RetrainSettings  # noqa: E402
from motion_matching.projector import c_evaluator  # noqa: E402
from motion_matching.toolkit import formats  # noqa: E402

from conftest import shared_fixture  # noqa: E402

FRAMES = 600
ITERATIONS = {"decompressor": 3, "projector": 3, "stepper": 3}
SMALL = ["--decompressor-iterations", "3", "--projector-iterations", "3", "--stepper-iterations", "3",
         "--cache-queries", "4096", "--threads", "1"]
RUNTIME = ("features.bin", "decompressor.bin", "latent.bin", "latent.json", "projector.bin", "stepper.bin")
NETWORKS = ("decompressor.bin", "projector.bin", "stepper.bin")


def settings(**changes):
    """A few iterations per network, a 4,096-query cache, one thread (the same bytes every run)."""
    values = {"iterations": ITERATIONS, "cache_queries": 4096, "threads": 1, **changes}
    return RetrainSettings(**values)


def save_database(path, seed):
    formats.save_database(path, synthetic.generate_synthetic_database(seed=seed, nframes=FRAMES))
    return path


def digests(folder):
    """{relative path: SHA-256} of every file under ``folder``."""
    folder = pathlib.Path(folder)
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def statuses(results):
    return {result.name: result.status for result in results}


def verify_status():
    return "ran" if c_evaluator.find_compiler() is not None else "skipped"


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """A whole run from a 600-frame database into ``run/``: (folder, database path, results)."""
    root = tmp_path_factory.mktemp("retrain")
    database = save_database(root / "database.bin", 0)
    results = run_retrain(root / "run", database_path=database, settings=settings())
    return root / "run", database, results


@pytest.fixture
def copied(first_run, tmp_path):
    """A copy of the first run's folder (and its database) to change: (folder, database path)."""
    folder, database, _ = first_run
    shutil.copytree(folder, tmp_path / "run")
    shutil.copyfile(database, tmp_path / "database.bin")
    return tmp_path / "run", tmp_path / "database.bin"


def test_a_full_run_writes_every_file_and_records_every_stage(first_run):
    folder, _, results = first_run
    assert [result.name for result in results] == list(STAGES)
    assert statuses(results) == {**{name: "ran" for name in STAGES}, "verify": verify_status()}
    state = json.loads((folder / "retrain.json").read_text())
    assert state["format"] == "mm-retrain-state"
    assert set(state["stages"]) == set(STAGES) - ({"verify"} if verify_status() == "skipped" else set())
    files = digests(folder)
    for name in RUNTIME:
        assert any(record["outputs"].get(name) == files[name] for record in state["stages"].values()), name
    assert formats.load_network(folder / "stepper.bin").sizes == [59, 512, 512, 59]
    assert formats.load_network(folder / "projector.bin").sizes == [27, 512, 512, 512, 512, 59]
    assert formats.load_network(folder / "decompressor.bin").sizes == [59, 512, 338]
    quality = {result.name: result.quality for result in results}
    assert quality["decompressor"].startswith("mean joint position error ")
    assert quality["projector"].startswith("held-out loss ")


def test_a_rerun_does_nothing(copied):
    folder, database = copied
    before = digests(folder)
    results = run_retrain(folder, database_path=database, settings=settings())
    assert statuses(results) == {**{name: "up to date" for name in STAGES}, "verify":
                                 "up to date" if verify_status() == "ran" else "skipped"}
    assert digests(folder) == before


@pytest.mark.parametrize("change", [{"recipes": {"projector": "toolkit"}},
                                    {"iterations": {**ITERATIONS, "projector": 4}}], ids=["recipe", "iterations"])
def test_changing_only_the_projector_reruns_only_the_projector_and_verify(copied, change):
    folder, database = copied
    before = digests(folder)
    results = run_retrain(folder, database_path=database, settings=settings(**change))
    assert statuses(results) == {"features": "up to date", "decompressor": "up to date", "cache": "up to date",
                                 "projector": "ran", "stepper": "up to date", "verify": verify_status()}
    after = digests(folder)
    assert after["projector.bin"] != before["projector.bin"]
    assert all(after[name] == before[name] for name in RUNTIME if name != "projector.bin")


def test_replacing_a_work_folder_run_of_other_settings_says_so_without_naming_force(copied, caplog):
    folder, database = copied
    caplog.set_level("WARNING", logger="motion_matching")
    more = SMALL[:2] + ["--projector-iterations", "4"] + SMALL[4:]  # the first run's settings, one iteration more
    result = CliRunner().invoke(main, ["retrain", "--database", str(database), "--out", str(folder), *more, "--quiet"])
    assert result.exit_code == 0, result.output
    checkpoint = folder / "retrain" / "projector" / "projector_checkpoint.pt"
    assert (f"{checkpoint}: replacing it (retrain's own work file): it was trained with other iterations"
            in caplog.messages)
    assert "--force" not in caplog.text
    assert not any("replacing it" in line and "--" in line for line in caplog.messages)  # retrain's has no --lr


def test_editing_the_database_reruns_every_stage(copied):
    folder, database = copied
    before = digests(folder)
    save_database(database, 1)
    results = run_retrain(folder, database_path=database, settings=settings())
    assert statuses(results) == {**{name: "ran" for name in STAGES}, "verify": verify_status()}
    assert all(digests(folder)[name] != before[name] for name in RUNTIME)


def test_an_interrupted_run_continues_to_the_unbroken_runs_files(first_run, tmp_path):
    unbroken, database, _ = first_run
    calls = []

    def interrupt_in_the_projector(step, module):
        calls.append(step)
        if len(calls) == ITERATIONS["decompressor"] + 2:  # the projector's second iteration
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_retrain(tmp_path / "run", database_path=database, settings=settings(), on_step=interrupt_in_the_projector)
    state = json.loads((tmp_path / "run" / "retrain.json").read_text())
    assert set(state["stages"]) == {"features", "decompressor", "cache"}
    results = run_retrain(tmp_path / "run", database_path=database, settings=settings())
    assert statuses(results) == {"features": "up to date", "decompressor": "up to date", "cache": "up to date",
                                 "projector": "ran", "stepper": "ran", "verify": verify_status()}
    files, expected = digests(tmp_path / "run"), digests(unbroken)
    assert all(files[name] == expected[name] for name in RUNTIME)  # continued, not restarted: the same bytes


def toolkit_folder(folder, *, same_features):
    """A resources/ folder as the toolkit ships it: its three networks (the shared fixtures), a features.bin and
    a latent.bin (of database.bin when ``same_features``, else of another database), and database.bin."""
    folder.mkdir()
    save_database(folder / "database.bin", 0)
    other = synthetic.generate_synthetic_database(seed=0 if same_features else 3, nframes=FRAMES)
    write_toolkit_files(folder, other, write_database=False)
    for name in NETWORKS:
        shutil.copyfile(shared_fixture("toolkit", name), folder / name)
    return folder


def test_in_the_toolkits_folder_its_files_are_refused_before_any_stage_runs(tmp_path):
    folder = toolkit_folder(tmp_path / "resources", same_features=False)
    before = digests(folder)
    done = CliRunner().invoke(main, ["retrain", "--database", str(folder / "database.bin"), "--out", str(folder),
                                     *SMALL])
    assert done.exit_code == 1, done.output
    assert done.output == (f"Error: {folder / 'features.bin'}: was not written by retrain, nor were decompressor.bin, "
                           "latent.bin, projector.bin or stepper.bin (the toolkit's own files?), and retrain writes "
                           "these names; pass --force to replace them, or choose another --out\n")
    assert digests(folder) == before  # nothing written, not even retrain.json or retrain/


def test_a_features_bin_of_the_same_bytes_is_kept_and_not_named(tmp_path):
    folder = toolkit_folder(tmp_path / "resources", same_features=True)
    done = CliRunner().invoke(main, ["retrain", "--database", str(folder / "database.bin"), "--out", str(folder),
                                     *SMALL])
    assert done.exit_code == 1, done.output
    assert done.output.startswith(f"Error: {folder / 'decompressor.bin'}: was not written by retrain, nor were "
                                  "latent.bin, projector.bin or stepper.bin (")


def test_force_replaces_the_toolkits_files_and_never_the_database(tmp_path):
    folder = toolkit_folder(tmp_path / "resources", same_features=True)
    before = digests(folder)
    done = CliRunner().invoke(main, ["retrain", "--database", str(folder / "database.bin"), "--out", str(folder),
                                     *SMALL, "--force"])
    assert done.exit_code == 0, done.output
    after = digests(folder)
    assert after["database.bin"] == before["database.bin"]
    assert after["features.bin"] == before["features.bin"]  # the same bytes: kept, up to date
    assert all(after[name] != before[name] for name in ("latent.bin",) + NETWORKS)
    table = done.output.splitlines()[-len(STAGES) - 1:]
    assert table[0].split() == ["stage", "status", "time", "quality", "files"]
    assert table[1].startswith("features") and "up to date" in table[1]
    assert [line.split()[0] for line in table[1:]] == list(STAGES)


def test_a_network_of_another_shape_is_refused_even_with_force(tmp_path):
    folder = toolkit_folder(tmp_path / "resources", same_features=True)
    rng = np.random.default_rng(0)
    layers = [(rng.standard_normal((27, 64)).astype(np.float32), np.zeros(64, np.float32)),
              (rng.standard_normal((64, 59)).astype(np.float32), np.zeros(59, np.float32))]
    ones = np.ones(27, np.float32)
    formats.save_network(folder / "projector.bin", formats.Network(0 * ones, ones, np.zeros(59, np.float32),
                                                                   np.ones(59, np.float32), layers))
    before = digests(folder)
    done = CliRunner().invoke(main, ["retrain", "--database", str(folder / "database.bin"), "--out", str(folder),
                                     *SMALL, "--force"])
    assert done.exit_code == 1, done.output
    assert done.output == (f"Error: {folder / 'projector.bin'}: is a network of 27 -> 59, 2 layers, and the new one "
                           "would be 27 -> 59, 5 layers: the runtime that loads it expects its shape, so nothing was "
                           "replaced (choose another --out, or delete it if the runtime now expects the new shape)\n")
    assert digests(folder) == before


def test_ctrl_c_says_one_line_and_exits_130(copied, monkeypatch):
    folder, database = copied

    def interrupted(context):
        raise KeyboardInterrupt

    monkeypatch.setattr("motion_matching.pipeline.stages.run_projector", interrupted)
    done = CliRunner().invoke(main, ["retrain", "--database", str(database), "--out", str(folder), *SMALL,
                                     "--projector-recipe", "toolkit", "--quiet"])
    assert done.exit_code == 130, done.output
    assert done.output.splitlines() == [f"interrupted; the finished stages are recorded in {folder / 'retrain.json'}: "
                                        "run the same command again to continue"]


def test_without_a_c_compiler_verify_is_skipped_saying_so(copied, monkeypatch):
    folder, database = copied
    monkeypatch.setattr(c_evaluator, "find_compiler", lambda: None)
    done = CliRunner().invoke(main, ["retrain", "--database", str(database), "--out", str(folder), *SMALL,
                                     "--projector-iterations", "4"])
    assert done.exit_code == 0, done.output
    assert "   skipped: no C compiler (cc or $CC): the runtime files were not run by tools/nnet_eval.c\n" in done.output
    assert done.output.splitlines()[-1].split()[:2] == ["verify", "skipped"]


def test_an_interrupted_cache_build_resumes_its_partial(copied):
    folder, database = copied
    chunk = 65_536  # build_cache's default rows per chunk: the unit a build resumes from
    reports = []

    def interrupt_after_a_chunk(done, total):
        reports.append(done)
        if done >= chunk:
            raise KeyboardInterrupt

    bigger = settings(cache_queries=2 * chunk)
    with pytest.raises(KeyboardInterrupt):
        run_retrain(folder, database_path=database, settings=bigger, cache_progress=interrupt_after_a_chunk)
    assert (folder / "retrain" / "projector_cache.h5.partial").exists()
    resumed = []
    results = run_retrain(folder, database_path=database, settings=bigger,
                          cache_progress=lambda done, total: resumed.append(done))
    assert resumed[0] == chunk  # the first report: the rows kept by the interrupted build
    assert statuses(results)["cache"] == "ran"
    # a grown cache starts with the same rows: the projector's finished run, which drew 3,072, stays as it was
    assert statuses(results)["projector"] == "up to date"
    assert {result.name: result.quality for result in results}["cache"] == f"{2 * chunk:,} queries"


def test_a_state_file_that_is_not_retrains_is_refused(copied):
    folder, database = copied
    (folder / "retrain.json").write_text("[1, 2]\n")
    done = CliRunner().invoke(main, ["retrain", "--database", str(database), "--out", str(folder), *SMALL])
    assert done.exit_code == 1, done.output
    assert done.output == (f"Error: {folder / 'retrain.json'}: is not a state file of this version of retrain "
                           "(mm-retrain-state 1): it would be replaced; pass --force to replace it, or choose another "
                           "--out\n")
    assert (folder / "retrain.json").read_text() == "[1, 2]\n"


def test_verify_without_the_checkpoints_checks_the_files_own_weights(copied):
    if c_evaluator.find_compiler() is None:
        pytest.skip("no C compiler (cc or $CC) on this machine: verify is skipped, not run")
    folder, database = copied
    for network in ("decompressor", "stepper"):
        shutil.rmtree(folder / "retrain" / network)  # deleted to save space: the runtime files stay
    results = run_retrain(folder, database_path=database, settings=settings(iterations={**ITERATIONS, "projector": 4}))
    assert statuses(results) == {"features": "up to date", "decompressor": "up to date", "cache": "up to date",
                                 "projector": "ran", "stepper": "up to date", "verify": "ran"}
    assert results[-1].quality.startswith("C and torch agree within ")


def test_a_small_database_trains_the_steppers_small_recipe_unless_its_recipe_is_asked():
    from motion_matching.stepper.config import SMALL_DATABASE_FRAMES, recipe_config

    below, at = RetrainSettings().for_database(SMALL_DATABASE_FRAMES - 1), RetrainSettings().for_database(
        SMALL_DATABASE_FRAMES)
    assert below.recipe_of("stepper") == "small" and below.config("stepper") == recipe_config("small")
    assert below.note("stepper") == (f"database.bin has {SMALL_DATABASE_FRAMES - 1:,} frames, fewer than "
                                     f"{SMALL_DATABASE_FRAMES:,}: it trains its 'small' recipe, ahead of 'fast' "
                                     "there (--stepper-recipe fast trains 'fast')")
    assert at.recipe_of("stepper") == "fast" and at.note("stepper") is None
    assert below.recipe_of("projector") == "fast" and below.recipe_of("decompressor") == "fast"
    asked = RetrainSettings(recipes={"stepper": "fast"}).for_database(600)
    assert asked.recipe_of("stepper") == "fast" and asked.note("stepper") is None
    for recipe in ("toolkit", "preview"):
        assert RetrainSettings(recipe=recipe).for_database(600).recipe_of("stepper") == recipe
    assert RetrainSettings().recipe_of("stepper") == "fast"  # the database not read yet


def test_retrain_on_a_small_database_says_the_stepper_trains_small_and_records_it(tmp_path):
    database = save_database(tmp_path / "database.bin", 0)
    command = ["retrain", "--database", str(database), "--out", str(tmp_path / "run"), *SMALL]
    done = CliRunner().invoke(main, command)
    assert done.exit_code == 0, done.output
    assert (f"== stepper: runs (never run here); database.bin has {FRAMES} frames, fewer than 2,500: it trains its "
            "'small' recipe, ahead of 'fast' there (--stepper-recipe fast trains 'fast')") in done.output.splitlines()
    recorded = json.loads((tmp_path / "run" / "retrain.json").read_text())["stages"]["stepper"]["settings"]
    assert (recorded["batch_size"], recorded["precision"], recorded["clip_windows"]) == (128, "float32", True)
    again = CliRunner().invoke(main, [*command, "--stepper-recipe", "fast"])
    assert again.exit_code == 0, again.output
    assert "== stepper: runs (its settings changed)" in again.output.splitlines()
    assert "fewer than 2,500" not in again.output


def test_preview_trains_each_networks_preview_and_the_projectors_fast_saying_so():
    from motion_matching.decompressor.config import recipe_config as decompressor_recipe
    from motion_matching.projector.recipes import recipe_config as projector_recipe

    preview = RetrainSettings(recipe="preview")
    assert preview.config("decompressor") == decompressor_recipe("preview")
    assert preview.recipe_of("projector") == "fast" and preview.config("projector") == projector_recipe("fast")
    assert preview.note("projector") == "it has no 'preview' recipe yet: it trains its 'fast' recipe"
    assert preview.note("decompressor") is None and preview.note("stepper") is None
    assert RetrainSettings(recipe="preview", recipes={"projector": "toolkit"}).recipe_of("projector") == "toolkit"
