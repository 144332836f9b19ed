"""The client APIs' servers (tests/api/helpers.py), one each per run: mmprep on the echo
engine, and on the token-replaying engine without parsers and with them."""

from __future__ import annotations

import pytest

from tests.api import helpers


@pytest.fixture(scope="session")
def echo_server():
    with helpers.echo_server() as server:
        yield server


@pytest.fixture(scope="session")
def plain_server():
    with helpers.plain_server() as server:
        yield server


@pytest.fixture(scope="session")
def parsing_server():
    with helpers.parsing_server() as server:
        yield server
