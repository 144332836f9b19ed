"""Chat requests as tests and benchmarks send them: the parts of a body, the POST, a turn
through the real openai client, and the check that an error body is OpenAI's shape."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import httpx
from PIL import Image

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionMessageParam

MODEL = "mmprep-echo"  # the model of the embedded echo engine, mmprep's default
ERROR_FIELDS = {"message", "type", "param", "code"}


def data_url(path: Path, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def png_data_url(width: int, height: int, noise: bool = False) -> str:
    """A PNG of one colour (or of noise, which compresses badly) as a data URL."""
    picture = (
        Image.effect_noise((width, height), 60).convert("RGB")
        if noise
        else Image.new("RGB", (width, height), (30, 120, 200))
    )
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def video(url: str, **sampling) -> dict:
    """A video_url part; `sampling` (fps, num_frames...) goes beside the URL."""
    return {"type": "video_url", "video_url": {"url": url, **sampling}}


def image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def chat(*parts: dict, model: str = MODEL, **extra) -> dict:
    """A chat request body: one user message whose content is `parts`."""
    return {"model": model, "messages": [{"role": "user", "content": list(parts)}], **extra}


def post(server, body: dict, timeout: float = 60) -> httpx.Response:
    """POST `body` to `server`'s /v1/chat/completions."""
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=timeout)


def openai_client(server) -> openai.OpenAI:
    import openai  # in the test extra: the benchmarks that only build bodies run without it

    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def ask(
    client: openai.OpenAI, content: str | list[dict], model: str = MODEL, stream: bool = False, **kwargs
) -> tuple[str, str | None, Any]:
    """One user message through the openai client: (text, finish_reason, usage), streamed
    (usage asked for) or not."""
    # The openai types know no video_url part (mmprep's and vLLM's extension): the client
    # sends the parts as they are.
    messages = cast("list[ChatCompletionMessageParam]", [{"role": "user", "content": content}])
    create = client.chat.completions.create
    if not stream:
        response = create(model=model, messages=messages, **kwargs)
        # no content (an answer of tool calls only) is no text, as when streamed
        return response.choices[0].message.content or "", response.choices[0].finish_reason, response.usage
    text, finish, usage = "", None, None
    for chunk in create(
        model=model, messages=messages, stream=True, stream_options={"include_usage": True}, **kwargs
    ):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        usage = chunk.usage or usage
    return text, finish, usage


def assert_error(
    response: httpx.Response, status: int, code: str | None = None, param: str | None = None
) -> dict:
    """`response` is an error of OpenAI's shape with this status (and code, and param, when
    given); returns the error object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == ERROR_FIELDS and error["message"]
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    return error
