"""The toolkit's own train_projector.py and ours with --exact-toolkit, online and offline, write the same bytes.

The script comes from ../shared/fixtures/toolkit/scripts (its README: run a copy whose only change is
``niter``, in a folder holding the three files, with the scripts folder on PYTHONPATH). 1,001 iterations
end on a save, so the script's last projector.bin is that of iteration 1,000.
"""
import pathlib

import pytest

from motion_matching.cache import build_cache
from motion_matching.data import generate
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector

from conftest import shared_fixture, toolkit_script_running

ITERATIONS = 1001
FRAMES = 3000  # the synthetic generator cuts 3,000 frames into 4 clips: the script's preview needs clip 2


def test_exact_toolkit_runs_write_the_scripts_projector_bin(tmp_path):
    shared_fixture("toolkit", "scripts")  # skips first, saying why, when ../shared is absent
    for module in ("matplotlib", "tensorboard", "sklearn"):
        pytest.importorskip(module, reason=f"the toolkit's script imports {module}")
    files = generate.generate_files(tmp_path, nframes=FRAMES)
    config = TrainConfig(iterations=ITERATIONS, exact_toolkit=True)
    cache_path = tmp_path / "toolkit_cache.h5"
    written = {}
    with toolkit_script_running("train_projector.py", tmp_path, iterations=ITERATIONS):  # writes projector.bin
        build_cache(files["features"], out=cache_path, nqueries=ITERATIONS * config.batch_size, exact_toolkit=True,
                    database_path=files["database"])
        for name, cache in (("online", None), ("offline", cache_path)):
            result = train_projector(config, features_path=files["features"], latent_path=files["latent"],
                                     database_path=files["database"], offline_cache=cache,
                                     out_dir=tmp_path / name, held_out_queries=0)
            assert result.steps == ITERATIONS
            written[name] = pathlib.Path(result.network_path).read_bytes()
    expected = (tmp_path / "projector.bin").read_bytes()
    for name in written:
        assert written[name] == expected, f"{name} projector.bin differs from the script's"
