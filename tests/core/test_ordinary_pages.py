"""A process that decodes media keeps its large tensors out of transparent huge pages (core/memory.py
use_ordinary_pages, from LocalPreprocessing.start), unless the operator asked numpy otherwise: read from the kernel's own
account of the array's mapping (its VmFlags: `hg` where huge pages were advised)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps").exists(), reason="reads the kernel's mappings: Linux only"
)

# In a process of its own: numpy's switch is global, and no test may leave it changed.
PROBE = """
import asyncio

import numpy as np

from mmprep.core.config import Settings
from mmprep.core.metrics import Metrics
from mmprep.preprocess.parts import LocalPreprocessing

asyncio.run(LocalPreprocessing(Settings(), Metrics()).start())  # as `mmprep serve` and Ray's replicas
tensor = np.empty(64 << 20, np.uint8)  # larger than a page's patches
address, inside = tensor.ctypes.data + (32 << 20), False  # inside: numpy advises past its first page
for line in open("/proc/self/smaps"):
    fields = line.split()
    if fields[0] == "VmFlags:":
        if inside:
            print("huge pages advised" if "hg" in fields[1:] else "ordinary pages")
    elif not fields[0].endswith(":"):  # a mapping's first line: its address range
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        inside = start <= address < end
"""


def pages_of_a_large_tensor(**env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key != "NUMPY_MADVISE_HUGEPAGE"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env={**environment, **env}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_decoding_processs_large_tensors_are_in_ordinary_pages():
    assert pages_of_a_large_tensor() == "ordinary pages"


def test_the_operators_own_choice_of_huge_pages_is_kept():
    assert pages_of_a_large_tensor(NUMPY_MADVISE_HUGEPAGE="1") == "huge pages advised"
