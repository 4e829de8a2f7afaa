"""Compiled steps: whether ``torch.compile`` can build kernels here, and what "auto" means for a run.

A compiled function fuses the many small element-wise operations around a network's matrix products
(normalisation, casts to and from bfloat16, ReLU and its gradient, the integration of velocities) into
a few kernels: the same arithmetic in fewer passes over memory. On 2 CPU cores the stepper's time is
mostly its matrix products, so a fast-recipe iteration of 512 windows of 20 frames went only from 69.9 ms
to 66.0 ms (the whole recipe about 1.05x faster, about 1.0x beside 2 busy processes;
``benchmarks/bench_stepper_compiled.py``): a setting to ask for, not a recipe's default. It rounds a
little differently from the eager operations (last bits, like fused AdamW), so it is a setting a
resumed run keeps. Inductor, torch's compiler, needs a C++ compiler for the CPU and triton
for a CUDA device; the first call builds the kernels (about 20 s on 2 cores, a second or two once they
are in inductor's cache).
"""
import dataclasses
import importlib.util

import torch

from motion_matching.errors import MotionMatchingError


def compiler_ready(device):
    """Whether inductor can build kernels for ``device`` (a ``torch.device``): a C++ compiler it finds for
    the CPU; triton for a CUDA device."""
    if device.type == "cuda":
        return importlib.util.find_spec("triton") is not None
    if device.type != "cpu":
        return False
    try:
        from torch._inductor import cpp_builder
        return bool(cpp_builder.get_cpp_compiler())
    except Exception:  # noqa: BLE001 - inductor raises its own kinds where it finds no compiler
        return False


def with_resolved_compile(config, name, device):
    """``config`` with its field ``name`` "auto" replaced by "on" where the fast step runs on a ``device`` that
    ``compiler_ready``, else "off"; raises ``MotionMatchingError`` for "on" where no compiler is ready."""
    value = getattr(config, name)
    option = "--" + name.replace("_", "-")
    if value == "auto":
        ready = config.step == "fast" and compiler_ready(device)
        return dataclasses.replace(config, **{name: "on" if ready else "off"})
    if value == "on" and not compiler_ready(device):
        raise MotionMatchingError(option, f"torch.compile finds no compiler for {device} (a C++ compiler on the "
                                  "CPU, triton on CUDA)", option=f"{option} off")
    return config


def compile_note(requested, resolved, option):
    """The line (str or None) a run says of its ``option`` (e.g. "--compiled-rollout"), ``requested`` as given
    and ``resolved`` by ``with_resolved_compile``: what "on" costs at the start, or why "auto" is off."""
    if resolved == "on":
        return (f"{option} on: the first iterations wait while torch.compile builds their kernels (about 20 s "
                "on 2 cores, a few once cached)")
    if requested == "auto" and resolved == "off":
        return (f"{option} auto: off here (the toolkit step, or no compiler torch.compile can use), so each "
                "iteration runs uncompiled")
    return None


def compiled(function, option):
    """``function`` compiled by ``torch.compile`` (built at its first call); a failure to compile raises
    ``MotionMatchingError`` naming ``option`` (the setting that turns it off) in one line."""
    compiled_function = torch.compile(function)

    def call(*args, **kwargs):
        try:
            return compiled_function(*args, **kwargs)
        except torch._dynamo.exc.TorchDynamoException as error:
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise MotionMatchingError(option, f"torch.compile failed ({first_line})",
                                      option=f"{option} off") from error

    return call
