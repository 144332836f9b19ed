"""The family tests' fixtures, over the `folder` each module makes of its family's model
folder: mmprep serving it (echo engine), and transformers' processor for it."""

from __future__ import annotations

import pytest

from tests.support.families import FamilyServer, transformers_processor


@pytest.fixture(scope="module")
def server(folder):
    with FamilyServer(folder) as live:
        yield live


@pytest.fixture(scope="module")
def model(folder):
    """(the folder as mmprep loads it, transformers' processor for it)"""
    return transformers_processor(folder)
