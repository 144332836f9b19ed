"""The engines registry: every --engine choice has its factory, each builds its engine from
the settings, and every engine class lives in app/mmprep/engines."""

from __future__ import annotations

import inspect

import pytest

from mmprep.core.config import ENGINES as ENGINE_CHOICES
from mmprep.core.config import Settings
from mmprep.engines.registry import ENGINES, build_engine

SETTINGS = {
    "echo": {},
    "workers": {"worker_url": ["http://127.0.0.1:1"]},
    "openai": {"upstream_url": "http://127.0.0.1:1/v1", "upstream_model": "m"},
}


def test_the_registry_holds_every_choice_of_the_settings():
    assert set(ENGINES) == set(ENGINE_CHOICES)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_engine_is_built_from_its_settings_and_lives_in_app_engines(name):
    engine = build_engine(Settings(engine=name, **SETTINGS[name]))
    assert inspect.getmodule(type(engine)).__name__.startswith("mmprep.engines.")


def test_an_engine_class_replaces_the_choice():
    engine = build_engine(Settings(engine_class="mmprep.engines.echo:EchoEngine"))
    assert type(engine).__name__ == "EchoEngine"
