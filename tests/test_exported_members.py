"""Each face's `__all__` is exactly the public names it holds (as httpx's own
test_exported_members): a name added to a package's face without `__all__` is not part of
what the libraries promise, and a name in `__all__` the face lacks breaks `import *`."""

from __future__ import annotations

import importlib
import types

import pytest

FACES = (
    "mmprep.decoders",
    "mmprep.processors",
    "mmprep.families",
    "mmprep.interface",
    "mmprep.engines",
    "mmprep.preprocess",
    "mmprep.derender",
    "mmprep.render",
    "mmprep.model",
    "mmprep.core.config",
)


@pytest.mark.parametrize("name", FACES)
def test_all_is_every_public_name_of_the_face(name):
    face = importlib.import_module(name)
    public = {
        member
        for member, value in vars(face).items()
        if not member.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(face.__all__) == sorted(public)
    assert len(set(face.__all__)) == len(face.__all__)
