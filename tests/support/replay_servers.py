"""Servers for the client APIs beyond chat (tests/api/conftest.py makes them fixtures): real
mmprep servers on loopback, one on the echo engine (mmprep's default) and two on the
token-replaying engine (tests/support/engines.py) with the derender fixtures' tokenizer, one
without parsers and one with the qwen3 reasoning and hermes tool-call parsers, so the
fixtures' answers come back through each API."""

from __future__ import annotations

from mmprep.api.app import create_app
from mmprep.core.config import Settings
from mmprep.service import Service
from tests.support.derender_fixtures import derendering, load
from tests.support.engines import TokenReplayEngine
from tests.support.servers import LiveServer, ThreadServer

REPLAY_MODEL = "qwen-test"
PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes"}


def replay(name: str, chunk: int = 20) -> dict:
    """The extra field that makes the replay engine answer with fixture `name`'s ids."""
    fixture = load(name)
    return {
        "replay": {
            "token_ids": fixture["token_ids"],
            "chunk": chunk,
            "finish_reason": fixture["engine_finish"],
        }
    }


def _replay_server(server: dict) -> ThreadServer:
    service = Service(
        Settings(served_model_name=[REPLAY_MODEL]),
        TokenReplayEngine(),
        derendering=derendering({"server": server}),
    )
    return ThreadServer(create_app(service=service))


def echo_server() -> LiveServer:
    return LiveServer()


def plain_server() -> ThreadServer:
    return _replay_server({})


def parsing_server() -> ThreadServer:
    return _replay_server(PARSERS)
