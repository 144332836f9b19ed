"""The engines registry (engines/registry.py's ENGINES, the --engine choices the settings
check by name): each choice names a factory that builds its engine from the settings, every
engine class lives in app/mmprep/engines, and an unknown name is refused naming the choices."""

from __future__ import annotations

import inspect

import pytest

from mmprep.core.config import ENGINE_NAMES, Settings
from mmprep.engines.loading import build_engine
from mmprep.engines.registry import ENGINES

SETTINGS = {
    "echo": {},
    "workers": {"worker_url": ["http://127.0.0.1:1"]},
    "openai": {"upstream_url": "http://127.0.0.1:1/v1", "upstream_model": "m"},
}


def test_every_choice_names_a_factory_that_imports():
    assert set(ENGINES.names()) == {"echo", "workers", "openai", "vllm-generate"}
    for name in ENGINES.names():
        assert callable(ENGINES.get(name)), name


def test_the_settings_check_the_registrys_names():
    """The settings sit below the engines: they hold the names, the registry the factories."""
    assert sorted(ENGINE_NAMES) == list(ENGINES.names())


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_engine_is_built_from_its_settings_and_lives_in_app_engines(name):
    engine = build_engine(Settings(engine=name, **SETTINGS[name]))
    assert inspect.getmodule(type(engine)).__name__.startswith("mmprep.engines.")


def test_an_engine_class_replaces_the_choice():
    engine = build_engine(Settings(engine_class="mmprep.engines.echo:EchoEngine"))
    assert type(engine).__name__ == "EchoEngine"


def test_an_unknown_engine_is_refused_naming_the_choices():
    with pytest.raises(
        ValueError, match="unknown engine 'nonesuch': choose one of echo, openai, vllm-generate"
    ):
        Settings(engine="nonesuch")
