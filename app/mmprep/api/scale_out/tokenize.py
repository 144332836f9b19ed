"""POST /tokenize and /detokenize, as vLLM 0.33 answers them (entrypoints/serve/tokenize/).

/tokenize takes either of vLLM's two bodies: a `prompt` (tokenized as it is, the tokenizer's
special tokens added unless `add_special_tokens` is false) or chat `messages` (rendered by the
chat template exactly as the render route renders them, media fetched and processed so each
image and video counts its tokens; the special tokens not added unless asked). It answers
`{count, max_model_len, tokens, token_strs}`, the token strings only with
`return_token_strs`. /detokenize takes `tokens` and answers `{prompt}`: their text, special
tokens kept. Both need the model folder (--model).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from ...model import load_model_folder
from ...render.prompts import check_ids, decode_prompt, encode_prompt, token_strings, with_special_tokens
from ...service import Service
from ...vllm.request import random_request_id
from ..common.chat_protocol import parse_chat_request
from ..common.served_model import check_model, served_model
from ..common.validation import validated


class TokenizeCompletionRequest(BaseModel):
    """vLLM's TokenizeCompletionRequest (fields it does not know are ignored, as vLLM's)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    prompt: str
    add_special_tokens: bool = True
    return_token_strs: bool | None = False


class TokenizeChatRequest(BaseModel):
    """vLLM's TokenizeChatRequest: the chat fields the template and the media read."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[Any]
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    return_token_strs: bool | None = False
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    tools: list[Any] | None = None

    def chat_fields(self) -> dict[str, Any]:
        """The chat request the render route would get for this conversation."""
        fields = self.model_dump(
            exclude={"add_special_tokens", "return_token_strs"}, exclude_none=True, exclude_unset=True
        )
        if fields.get("tools") == []:  # vLLM's /tokenize takes an empty list the chat route refuses
            del fields["tools"]
        return fields


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    tokens: list[Annotated[int, Field(ge=0, le=2**63 - 1)]]


async def tokenize(service: Service, document: Any, http: Request, cancel: threading.Event) -> dict:
    request: TokenizeCompletionRequest | TokenizeChatRequest
    if isinstance(document, dict) and "messages" in document and "prompt" not in document:
        request = validated(TokenizeChatRequest, document, "a tokenize request: prompt or messages")
    else:
        request = validated(TokenizeCompletionRequest, document, "a tokenize request: prompt or messages")
    check_model(service, request.model)
    folder = load_model_folder(str(service.settings.model), service.settings.processor)
    if isinstance(request, TokenizeChatRequest):
        ids = await _chat_ids(service, request, http, cancel)
    else:
        ids = await asyncio.to_thread(encode_prompt, folder, request.prompt, request.add_special_tokens)
    return {
        "count": len(ids),
        "max_model_len": service.settings.max_model_len,
        "tokens": ids,
        "token_strs": token_strings(folder, ids) if request.return_token_strs else None,
    }


async def _chat_ids(
    service: Service, request: TokenizeChatRequest, http: Request, cancel: threading.Event
) -> list[int]:
    """The conversation's prompt ids, media expanded: the render route's own preprocessing."""
    chat = parse_chat_request({**request.chat_fields(), "model": served_model(service, request.model)})
    request_id = f"tokenize-{http.headers.get('x-request-id') or random_request_id()}"
    prepared, _ = await service.preprocessor.prepare(chat.chat_input(), request_id, cancel)
    assert prepared.prompt is not None  # with --model every request is rendered
    ids = prepared.prompt.token_ids.tolist()
    if request.add_special_tokens:
        ids = with_special_tokens(
            load_model_folder(str(service.settings.model), service.settings.processor), ids
        )
    return ids


async def detokenize(service: Service, document: Any, http: Request, cancel: threading.Event) -> dict:
    request = validated(DetokenizeRequest, document, "a detokenize request: tokens")
    check_model(service, request.model)
    folder = load_model_folder(str(service.settings.model), service.settings.processor)
    check_ids(folder, request.tokens, "tokens")
    return {"prompt": await asyncio.to_thread(decode_prompt, folder, request.tokens)}
