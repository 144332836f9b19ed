"""The client APIs' servers (tests/support/replay_servers.py), one each per run: mmprep on the echo
engine, and on the token-replaying engine without parsers and with them."""

from __future__ import annotations

import pytest

from tests.support import replay_servers


@pytest.fixture(scope="session")
def echo_server():
    with replay_servers.echo_server() as server:
        yield server


@pytest.fixture(scope="session")
def plain_server():
    with replay_servers.plain_server() as server:
        yield server


@pytest.fixture(scope="session")
def parsing_server():
    with replay_servers.parsing_server() as server:
        yield server
