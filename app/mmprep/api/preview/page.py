"""See what a model would be shown: one video through the service's own preprocessing,
drawn as a contact sheet, with the account the echo engine gives of it.

`preview_media` is the one path, for `GET /preview`'s page (through `POST /preview`) and
for `mmprep preview`: it builds the chat request a client would send for the video
(`preview_request`) and hands it to the Preprocessor, so the same sampling options, SSRF
rules, limits and errors apply as to chat requests. The page is off unless
`--enable-preview`: it fetches whatever URL it is given, for whoever asks.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect

from ...core.config import Settings
from ...core.disconnect import ClientGone, until_disconnect
from ...core.errors import ServiceError
from ...engines.echo import account
from ...media.data_url import DataURL
from ...preprocess import LocalPreprocessing
from ...service import Service
from ...transport.body_limit import BODY_REFUSED
from ...transport.json_body import read_json_body
from ..common.chat_protocol import parse_chat_request
from ..common.errors import client_gone, refuse
from .sheet import contact_sheet, png_bytes

log = logging.getLogger("mmprep.api")
PAGE = Path(__file__).with_name("preview.html")


@dataclass(frozen=True)
class Preview:
    png: bytes  # the contact sheet
    account: dict[str, Any]  # what the echo engine reports for the request
    timing: dict[str, float]  # milliseconds per phase (Timing.milliseconds)


class PreviewForm(BaseModel):
    """What the page sends: a URL (an upload comes as a data URL), the sampling keys a
    video_url part takes (checked by the preprocessor, as in a chat request), and a name."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    url: Annotated[str, Field(min_length=1)] | DataURL  # a long data URL comes parsed (json_body.py)
    sampling: dict[str, Any] = {}
    name: str | None = None


def preview_request(url: str | DataURL, sampling: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat request a client would send to have this one video seen."""
    part = {"type": "video_url", "video_url": {**sampling, "url": url}}  # sampling cannot replace the URL
    return {"model": model, "messages": [{"role": "user", "content": [part]}]}


async def preview_media(
    service: Service,
    url: str | DataURL,
    sampling: dict[str, Any],
    title: str,
    cancel: threading.Event | None = None,
) -> Preview:
    """The video at `url` sampled as `sampling` asks, as the service would hand it to an
    engine. Raises ServiceError as a chat request with that video would be refused."""
    request = parse_chat_request(preview_request(url, sampling, service.settings.served_model_name[0]))
    request_id = f"preview-{uuid.uuid4().hex}"
    prepared, timing = await service.preprocessor.prepare(
        request.chat_input(), request_id, cancel or threading.Event()
    )
    ms, video = timing.milliseconds(), prepared.media[0]
    count, height, width = video.tensor.shape[:3]
    notes = [
        f"sampling asked: {describe_sampling(sampling, service.settings)}",
        f"the engine gets {count} frames of {width}x{height}"
        f"  ·  fetch {ms['fetch']:.1f} ms  ·  decode {ms['decode']:.1f} ms",
    ]
    if video.processed is not None:
        notes.append(f"processor {service.settings.processor}: {video.processed.num_tokens} tokens")
    preprocessing = service.preprocessing
    if not isinstance(preprocessing, LocalPreprocessing):  # on Ray the frames stay in the decode replica
        raise ServiceError(
            "the preview needs this process's own preprocessing", "preview_unavailable", None, 501
        )
    sheet = await preprocessing.pool.run(lambda: png_bytes(contact_sheet(video, title, notes)))
    return Preview(sheet, json.loads(account(prepared)), ms)


def describe_sampling(sampling: dict[str, Any], settings: Settings) -> str:
    if not sampling:
        return (
            f"nothing (the server's default: {settings.default_fps:g} fps, "
            f"at most {settings.default_max_frames} frames)"
        )
    return ", ".join(f"{key}={value}" for key, value in sampling.items())


def readable(error: ServiceError) -> str:
    """The error's message without the name of the chat request's part: a preview has one."""
    return error.message.removeprefix(f"{error.param}: ")


def page(service: Service) -> Response:
    """GET /preview: the form, self-contained (no external assets)."""
    if not service.settings.enable_preview:
        return refuse(service, _disabled())
    return HTMLResponse(PAGE.read_text())


async def preview_post(service: Service, http: Request) -> Response:
    """POST /preview: the page's form as JSON in; the sheet (a PNG data URL), the echo
    account and the timing out, or an error in OpenAI's shape."""
    if not service.settings.enable_preview:
        return refuse(service, _disabled())
    try:
        form = _parse_form(await read_json_body(http))
        slot = await service.admit(http)
    except ServiceError as error:
        return refuse(service, error)
    except ClientDisconnect:
        if http.scope.get(BODY_REFUSED):  # the body limit cut it off, answered and counted the 413
            return Response(status_code=413)
        return client_gone(service)
    except ClientGone:  # it left while queued
        return client_gone(service)
    cancel = threading.Event()
    try:
        title = form.name or (
            "an upload" if isinstance(form.url, DataURL) or form.url.startswith("data:") else form.url
        )
        preview = await until_disconnect(
            http, preview_media(service, form.url, form.sampling, title, cancel), cancel
        )
    except ClientGone:
        return client_gone(service)
    except Exception as error:  # as chat requests: a ServiceError is the answer, else a logged 500
        return refuse(service, error)
    finally:
        slot.release()
    service.record(200)
    log.info("previewed", extra={"server_timing": preview.timing})
    sheet = "data:image/png;base64," + base64.b64encode(preview.png).decode()
    return JSONResponse({"sheet": sheet, "account": preview.account, "timing": preview.timing})


def _parse_form(document: Any) -> PreviewForm:
    try:
        return PreviewForm.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise ServiceError(
            f"{field}: {first['msg']}" if field else first["msg"], "invalid_request", field
        ) from None


def _disabled() -> ServiceError:
    return ServiceError(
        "the preview page is off on this server: start it with --enable-preview "
        "(it fetches any URL it is given)",
        "preview_disabled",
        status=404,
    )
