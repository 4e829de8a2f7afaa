"""Build and drive ``tools/nnet_eval.c``, the plain-C reference evaluator of the runtime's network layout.

Used by the tests (agreement with torch, refusal of damaged files) and by ``benchmarks/bench_inference.py``
(inference against brute-force search, timed inside the C program). The C source ships with the
repository, not with an installed wheel.
"""
import os
import pathlib
import shutil
import subprocess

import numpy as np

from motion_matching.errors import InvalidFile, MissingFile, MotionMatchingError

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "tools" / "nnet_eval.c"
DEFAULT_FLAGS = ("-std=c99", "-O2")


def find_compiler():
    """Path of the C compiler named by ``$CC`` (default ``cc``), or None when there is none."""
    return shutil.which(os.environ.get("CC", "cc"))


def build_c_evaluator(out_dir, *, flags=DEFAULT_FLAGS, source=SOURCE, name="nnet_eval"):
    """Compile ``source`` into ``out_dir/name`` with the system compiler; returns the executable's Path."""
    source = pathlib.Path(source)
    if not source.is_file():
        raise MissingFile(source, "C evaluator source is missing (it ships with the repository only)")
    compiler = find_compiler()
    if compiler is None:
        raise MotionMatchingError(source, "no C compiler: set CC or install cc")
    executable = pathlib.Path(out_dir) / name
    command = [compiler, *flags, "-o", str(executable), str(source), "-lm"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise MotionMatchingError(source, f"does not compile with {compiler}: {first}")
    return executable


def write_matrix(path, values):
    """Write ``values`` (rows, cols) as ``[u32 rows, u32 cols, rows*cols f32]`` little-endian."""
    values = np.ascontiguousarray(values, dtype="<f4")
    with open(path, "wb") as stream:
        np.asarray(values.shape, dtype="<u4").tofile(stream)
        values.tofile(stream)


def read_matrix(path):
    """Read a ``[u32 rows, u32 cols, f32...]`` file; returns (rows, cols) float32."""
    raw = pathlib.Path(path).read_bytes()
    rows, cols = np.frombuffer(raw[:8], dtype="<u4").tolist()
    if len(raw) != 8 + 4 * rows * cols:
        raise InvalidFile(path, f"{len(raw)} bytes for a {rows} x {cols} matrix")
    return np.frombuffer(raw[8:], dtype="<f4").reshape(rows, cols).astype(np.float32)


def read_indices(path):
    """Read a ``[u32 n, n i32]`` file; returns (n,) int64."""
    raw = pathlib.Path(path).read_bytes()
    (count,) = np.frombuffer(raw[:4], dtype="<u4").tolist()
    if len(raw) != 4 + 4 * count:
        raise InvalidFile(path, f"{len(raw)} bytes for {count} indices")
    return np.frombuffer(raw[4:], dtype="<i4").astype(np.int64)


def run_c_evaluator(executable, mode, source, rows_path, out_path, *, repeats=None, timeout=None):
    """Run ``executable mode source rows_path out_path [repeats]``; returns the CompletedProcess (text)."""
    command = [str(executable), mode, str(source), str(rows_path), str(out_path)]
    if repeats is not None:
        command.append(str(int(repeats)))
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def parse_pass_seconds(stdout):
    """Per-pass seconds (list of float) from the ``pass <i> seconds <s> ...`` lines of a timed run."""
    return [float(line.split()[3]) for line in stdout.splitlines() if line.startswith("pass ")]


def c_network_outputs(executable, network_path, queries, *, workdir):
    """Outputs (m, nout) float32 of the C evaluator for ``queries`` (m, nin); raises on a non-zero exit."""
    rows, out = pathlib.Path(workdir) / "c_inputs.bin", pathlib.Path(workdir) / "c_outputs.bin"
    write_matrix(rows, queries)
    done = run_c_evaluator(executable, "eval", network_path, rows, out)
    if done.returncode != 0:
        raise InvalidFile(network_path, f"C evaluator failed: {done.stderr.strip()}")
    return read_matrix(out)
