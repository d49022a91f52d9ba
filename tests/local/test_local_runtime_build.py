"""The llama.cpp runtime that ``scripts/build-local-runtime`` installs is built for a fixed
x86-64 level, not for the build machine: a ``-march=native`` build on a CPU that advertises
AMX compiles ggml's AMX kernels, which crashed the process (SIGSEGV in the first decode)
on this project's Intel VMs, and a cached wheel must run on the next machine too."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from gateway.upstream.local.catalog import resolve_model_path
from tests.local.conftest import QWEN


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fixed level is x86-64's")
def test_the_runtime_has_no_machine_specific_kernels(local_runtime: None) -> None:
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    assert "AVX2 = 1" in info, info  # the level the script asks for
    for feature in ("AMX", "AVX512"):
        assert feature not in info, f"{feature} kernels in the runtime: {info}"


@pytest.mark.slow
def test_the_runtime_generates_in_a_fresh_process(local_runtime: None) -> None:
    # A crash in the native kernels kills the process: run it apart so it fails one test.
    path = resolve_model_path(QWEN, os.environ)
    script = (
        "import sys, llama_cpp\n"
        "llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)\n"
        "out = llm.create_completion('One, two,', max_tokens=4, temperature=0)\n"
        "print(len(out['choices'][0]['text']) > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.strip() == "True"
