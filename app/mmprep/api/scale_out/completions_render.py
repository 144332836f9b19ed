"""POST /v1/completions/render: vLLM's completion render (entrypoints/scale_out/render/), a
completion request in, one GenerateRequest per prompt out (a JSON list), for
/inference/v1/generate.

The prompt is vLLM's: a string, a list of strings, a list of token ids, or a list of such
lists. Text is tokenized as it is, the tokenizer's special tokens added unless
`add_special_tokens` is false; token ids are taken as given (each checked against the
vocabulary). The ids are "cmpl-" and the client's X-Request-Id (else the body's request_id,
else a random one), "-0", "-1", ... after it when there are several prompts. The sampling
params are the chat render's (app/mmprep/vllm/sampling.py), max_tokens 16 unless the client says,
as vLLM's CompletionRequest.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fastapi import Request

from ...core.errors import ServiceError
from ...interface.prepared import PreparedRequest, TokenPrompt
from ...model import load_model_folder
from ...render.renderer import check_prompt_length
from ...service import Service
from ...vllm.request import completion_generate_request, random_request_id
from ..common.completion_protocol import CompletionRenderRequest, check_refused, prompt_ids
from ..common.served_model import check_model
from ..common.validation import validated


async def render_completion(service: Service, document: Any, http: Request, cancel: threading.Event) -> list:
    request = validated(CompletionRenderRequest, document, "a completion request")
    check_model(service, request.model)
    check_refused(request)
    if request.n > 1:
        raise ServiceError("n > 1 is not supported: send one request per choice", "unsupported_n", "n")
    folder = load_model_folder(str(service.settings.model), service.settings.processor)
    prompts = await asyncio.to_thread(prompt_ids, folder, request)
    base = f"cmpl-{http.headers.get('x-request-id') or request.request_id or random_request_id()}"
    extra = request.model_extra or {}
    stream_options = request.stream_options.model_dump() if request.stream_options else None
    answers = []
    for index, ids in enumerate(prompts):
        where = "prompt" if len(prompts) == 1 else f"prompt[{index}]"
        check_prompt_length(len(ids), service.settings.max_model_len, where)
        prepared = PreparedRequest(
            request_id=base,
            model=request.model or service.settings.served_model_name[0],
            messages=[],
            media=[],
            sampling=request.sampling(),
            stream=bool(request.stream),
            extra=extra,
            prompt=TokenPrompt(ids, ()),
            completion=tuple(ids),
        )
        request_id = base if len(prompts) == 1 else f"{base}-{index}"
        body = completion_generate_request(prepared, service.generate_options, request_id, stream_options)
        body["model"] = request.model
        answers.append(body)
    return answers
