"""POST /v1/responses/render: vLLM 0.33's render of an OpenAI Responses request
(entrypoints/scale_out/render/ render_responses_request): the request turned into the chat
request /v1/responses serves (app/mmprep/api/common/responses_protocol.py, vLLM's construct_input_messages),
rendered as the chat render renders it, and written as vLLM writes a Responses render's
GenerateRequest: the body's `request_id` (else `resp_` and vLLM's random id; not the
X-Request-Id), no stream options and none of a chat's parse context (vLLM builds them for
chat only), and tools rendered under any tool choice (vLLM's chat render refuses "auto"
without a tool-call parser; its Responses render does not). `previous_response_id` is
refused, as vLLM's stateless render refuses it.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ...service import Service
from ...vllm.request import random_request_id
from ..common.responses_protocol import ResponsesToChat
from .chat_render import render_chat_document


async def render_responses(
    service: Service, document: Any, http: Request, cancel: threading.Event
) -> Response:
    chat = ResponsesToChat().chat_document_of(document)  # the conversion /v1/responses serves with
    given = document.get("request_id")
    changes = {
        "request_id": given if isinstance(given, str) else f"resp_{random_request_id()}",
        "stream_options": None,
        "parse_context": None,
        "reasoning_ended": None,
    }
    # tools under "auto" are rendered without a tool-call parser, as vLLM's Responses render does
    return await render_chat_document(service, chat, http, cancel, changes, check_tools=False)
