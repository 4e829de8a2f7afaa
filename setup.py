"""Learned Motion Matching projector trainer: a drop-in plug-in for Daniel Holden's toolkit."""
from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


class OptimisedBuildExt(build_ext):
    """Compiler flags by compiler family; optional: ``neighbours.cells.fallback`` runs without it."""

    def build_extensions(self):
        unix = self.compiler.compiler_type == "unix"
        for extension in self.extensions:
            extension.extra_compile_args = ["-O3", "-fno-math-errno", "-Wno-psabi"] if unix else ["/O2"]
        super().build_extensions()


CELLS = "motion_matching/neighbours/cells"
cell_search = Extension("motion_matching.neighbours.cells._cellsearch",
                        [f"{CELLS}/_cellsearch.c", f"{CELLS}/cellsearch.c"],
                        depends=[f"{CELLS}/cellsearch.h"], optional=True)

setup(
    name="motion-matching-projector",
    version="0.1.0",
    description="Train the Learned Motion Matching projector fast, exactly and reproducibly",
    packages=find_packages(include=["motion_matching", "motion_matching.*"]),
    py_modules=["train_projector", "train_decompressor", "generate_database"],
    # the compiled inner loop of the default search; without a C compiler the pure-numpy one is used
    ext_modules=[cell_search],
    cmdclass={"build_ext": OptimisedBuildExt},
    python_requires=">=3.9",
    install_requires=[
        "numpy>=1.23",
        "faiss-cpu>=1.7.4",
        # 2.4 first has fused AdamW on the CPU (the default fast step); a range that torch 2.13.0 (the
        # CPU wheel CI installs first) satisfies
        "torch>=2.4",
        "click>=8.0",
        "h5py>=3.6",
        "scikit-learn>=1.1",
        "scipy>=1.5",
        "threadpoolctl>=3",
        "tqdm>=4.60",
    ],
    extras_require={
        "plot": ["matplotlib>=3.5"],
        "onnx": ["onnx>=1.14", "onnxruntime>=1.16"],
        "tensorboard": ["tensorboard>=2.10"],
        "lint": ["ruff>=0.5", "import-linter>=2.0"],
        "test": ["pytest>=7", "hypothesis>=6", "matplotlib>=3.5", "onnx>=1.14", "onnxruntime>=1.16",
                 "tensorboard>=2.10"],
    },
    entry_points={"console_scripts": ["mm-projector=motion_matching.cli:main"]},
)
