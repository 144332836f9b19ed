"""Messages as vLLM reads them, checked against vLLM 0.33.0's own render app: each case's
answer (status, and the prompt's token ids) recorded from `vllm launch render` by
tests/data/render/record_vllm_messages.py, replayed on mmprep's render route (a real server on
loopback, the same folder). An error is a 400 both sides; mmprep's names the field."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.servers import LiveServer

DATA = Path(__file__).parents[1] / "data" / "render"
RECORDED = json.loads((DATA / "vllm_messages.json").read_text())
CASES = RECORDED["cases"]


def _folder(root: Path) -> Path:
    # the recording script's own folder maker: the same files on both sides
    from tests.data.render import record_vllm_messages

    return record_vllm_messages.folder(root)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    model = _folder(tmp_path_factory.mktemp("vllm-messages"))
    with LiveServer(model=model) as plain:
        with LiveServer(model=model, trust_request_chat_template=True) as trusted:
            yield {False: plain, True: trusted}


def test_recorded_from_vllm_0_33():
    assert RECORDED["vllm"] == "0.33.0"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_render_route_answers_as_vllms(servers, name):
    case = CASES[name]
    server = servers[case["trusted"]]
    answer = httpx.post(
        f"{server.url}/v1/chat/completions/render",
        json={"model": "Qwen3-VL-Test", **case["request"]},
        timeout=60,
    )
    assert answer.status_code == case["status"], answer.text
    if case["status"] == 200:
        assert answer.json()["token_ids"] == case["token_ids"]
    else:
        assert answer.json()["error"]["param"]  # vLLM's says null; mmprep names the field
