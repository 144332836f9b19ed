"""The service's memory policy (app/mmprep/core/memory.py)."""

from __future__ import annotations

import importlib

from mmprep.core.config import Settings
from mmprep.service import Service


def _hugepage_switch():
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return importlib.import_module(module)._set_madvise_hugepage
        except (ImportError, AttributeError):
            continue
    raise AssertionError("numpy has no madvise switch")


def test_a_service_asks_for_no_huge_pages_for_its_arrays():
    switch = _hugepage_switch()
    before = switch(True)
    try:
        Service(Settings())
        assert switch(True) is False  # the service had turned numpy's huge-page advice off
    finally:
        switch(before)
