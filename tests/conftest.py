"""Shared fixtures: the read-only fixtures beside the project, and small valid toolkit files."""
import contextlib
import dataclasses
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

from motion_matching.toolkit import formats

TESTS = pathlib.Path(__file__).parent
SHARED = TESTS.parent.parent / "shared" / "fixtures"
TOOLKIT_NETWORKS = TESTS / "data" / "toolkit"


TORCH_ABSENT = importlib.util.find_spec("torch") is None
NEEDS_TORCH = "needs torch, which is not installed (the torch-free run of the suite, as in .ci/run)"


FORK_WARNING = "use of fork() may lead to deadlocks"  # Python 3.12+, forking while threads run


def pytest_configure(config):
    """Warnings raised by the project's own code fail the tests."""
    config.addinivalue_line("filterwarnings", "error:::motion_matching")


@pytest.fixture(autouse=True)
def load_unmeasured(request, monkeypatch):
    """In-process runs see the machine's load as unknown, so the thread policy takes every core as it does
    where /proc/stat is absent: a test's thread count and bytes must not depend on what else the machine
    runs. tests/test_threads.py measures the real load; subprocesses (the CLI tests) measure it too."""
    if request.module.__name__ == "test_threads":
        yield
        return
    from motion_matching import threads

    measure = threads.cpu_times
    monkeypatch.setattr(threads, "cpu_times", lambda cpus, **kwargs: dataclasses.replace(
        measure(cpus, **kwargs), busy=None))
    yield


@pytest.fixture(autouse=True)
def forking_a_threaded_process_fails():
    """Fail a test during which a threaded process forked (os.fork cannot raise the warning as an error, so it
    is recorded and checked here); other warnings recorded meanwhile are passed on to pytest."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=".*" + re.escape(FORK_WARNING), category=DeprecationWarning)
        yield
    forks = [str(warning.message) for warning in caught if FORK_WARNING in str(warning.message)]
    for warning in caught:
        if FORK_WARNING not in str(warning.message):
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if forks:
        pytest.fail(f"a threaded process forked: {forks[0]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """Without torch, a test module that imports it (directly or through ``projector/``) is skipped, saying
    why, instead of failing to collect; any other import error still fails."""
    outcome = yield
    report = outcome.get_result()
    if TORCH_ABSENT and report.failed and isinstance(collector, pytest.Module) and \
            "No module named 'torch'" in str(report.longrepr):
        report.outcome, report.longrepr = "skipped", (str(collector.path), 0, f"Skipped: {NEEDS_TORCH}")


def needs_torch():
    """Skip the calling test, saying why, when torch is not installed."""
    if TORCH_ABSENT:
        pytest.skip(NEEDS_TORCH)


def shared_fixture(*parts):
    """Path of a file under ../shared/fixtures, or skip the test saying it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: ../shared/fixtures is only beside the project in CI and sessions")
    return path


@contextlib.contextmanager
def toolkit_script_running(name, folder, *, iterations):
    """Start a copy of the toolkit's script ``name`` (../shared/fixtures/toolkit/scripts; skip when absent) with
    only ``niter`` changed, in ``folder``, as its README says, and run the body beside it: at batch 32 the
    script is held by Python's pace more than by the cores, so both together take little more than the longer
    (the five parity tests: 270 s one after the other, 173 s side by side, on a 2-core float32 host). On
    leaving, wait for the script and fail the test if it failed; if the body raised, kill it."""
    scripts = shared_fixture("toolkit", "scripts")
    text = (scripts / name).read_text()
    assert text.count("niter = 500000") == 1
    (folder / name).write_text(text.replace("niter = 500000", f"niter = {iterations}"))
    env = dict(os.environ, PYTHONPATH=str(scripts), MPLBACKEND="Agg")
    with tempfile.TemporaryFile() as errors:
        script = subprocess.Popen([sys.executable, name], cwd=folder, env=env, stdout=subprocess.DEVNULL,
                                  stderr=errors)
        try:
            yield
            returncode = script.wait(timeout=900)
        finally:
            if script.poll() is None:
                script.kill()
                script.wait()
        errors.seek(0)
        assert returncode == 0, errors.read()[-2000:].decode(errors="replace")


def random_features(nframes=2000, nfeatures=27, seed=0):
    """Clustered, correlated random features (nframes, nfeatures) float32, shaped like matching features."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(nframes // 100, 1), nfeatures))
    walk = np.cumsum(rng.standard_normal((nframes, nfeatures)) * 0.05, axis=0)
    values = centres[rng.integers(0, len(centres), nframes)] + walk - walk.mean(0)
    return values.astype(np.float32)


def write_small_toolkit_files(folder, *, nframes=2000, nlatent=32, seed=0):
    """Write features.bin and latent.bin of ``nframes`` frames into ``folder``; returns their paths."""
    folder = pathlib.Path(folder)
    rng = np.random.default_rng(seed + 1)
    features = random_features(nframes, seed=seed)
    latent = (rng.standard_normal((nframes, nlatent)) * 0.25).astype(np.float32)
    zeros = np.zeros(features.shape[1], np.float32)
    formats.save_features(folder / "features.bin", formats.Features(features, zeros, zeros + 1))
    formats.save_latent(folder / "latent.bin", latent)
    return folder / "features.bin", folder / "latent.bin"


@pytest.fixture
def small_files(tmp_path):
    """(features.bin, latent.bin) paths of 2,000 random frames in a temporary folder."""
    return write_small_toolkit_files(tmp_path)
