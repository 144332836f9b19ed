"""Records what vLLM 0.33 makes of each Messages and Responses request in
tests/data/vllm_real/client_api_translations.json: the chat request of its own translation
(AnthropicServingMessages.to_chat_completion_request; construct_input_messages for the
Responses input), the fields the file names under "compared", nulls left out. Run it in
vLLM's render venv (scripts/vllm_venv.sh makes it):

    VLLM_TARGET_DEVICE=cpu .venv-vllm-render/bin/python scripts/vllm_client_translations.py [OUT]

It reads the cases from the file and writes them back with each one's "vllm" filled in
(to OUT instead, when given).
"""

import json
import sys
from pathlib import Path

from vllm.entrypoints.anthropic.protocol import AnthropicMessagesRequest
from vllm.entrypoints.anthropic.serving import AnthropicServingMessages
from vllm.entrypoints.openai.responses.protocol import ResponsesRequest
from vllm.entrypoints.openai.responses.utils import construct_input_messages

FILE = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm_real" / "client_api_translations.json"


def without_nulls(value):
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def translated(case: dict) -> dict:
    if case["api"] == "messages":
        request = AnthropicMessagesRequest.model_validate(case["body"])
        chat = AnthropicServingMessages.to_chat_completion_request(request).model_dump(mode="json")
        return without_nulls({key: chat.get(key) for key in recorded["compared"]})
    request = ResponsesRequest.model_validate(case["body"])
    messages = construct_input_messages(
        request_instructions=request.instructions, request_input=request.input
    )
    return without_nulls({"messages": json.loads(json.dumps(messages, default=lambda o: o.model_dump()))})


recorded = json.loads(FILE.read_text())  # the fields compared, and the cases
for case in recorded["cases"].values():
    case["vllm"] = translated(case)
out = Path(sys.argv[1]) if len(sys.argv) > 1 else FILE
out.write_text(json.dumps(recorded, indent=1, ensure_ascii=False, default=lambda o: o.model_dump()) + "\n")
