"""The servers tests/client_api_fixtures.py describes, started once for the folder."""

from __future__ import annotations

import client_api_fixtures
import pytest


@pytest.fixture(scope="package")
def echo_server():
    with client_api_fixtures.echo_server() as server:
        yield server


@pytest.fixture(scope="package")
def plain_server():
    with client_api_fixtures.plain_server() as server:
        yield server


@pytest.fixture(scope="package")
def parsing_server():
    with client_api_fixtures.parsing_server() as server:
        yield server
