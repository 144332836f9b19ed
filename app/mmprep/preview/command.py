"""`mmprep preview`: one contact sheet per video, drawn by the service's own parts.

A Service is started in this process (its echo engine is never asked anything) and each
video goes through `api.preview.preview_media`, the path the /preview page takes: local
files as file:// URLs under their own folder, URLs as they are, so sampling, SSRF rules,
limits and errors are those of a chat request.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict
from urllib.parse import urlsplit

from pydantic import ValidationError

from mmprep.decoders import VIDEO_SUFFIXES

from ..api.preview.page import preview_media, readable
from ..core.config import Settings
from ..core.errors import ServiceError
from ..service import Service, SettingsError, load_resources
from .config import PreviewConfig


@dataclass(frozen=True)
class Sheet:
    url: str  # as a client would send it: file://, http(s):// or data:
    title: str
    output: Path


class VisionSettings(TypedDict, total=False):
    """The processor settings a preview passes on to the service, when it has a processor."""

    processor: str
    processor_resize: Literal["exact", "ffmpeg"]


class PreviewInputError(ValueError):
    """The source or the output cannot be used; nothing was drawn."""


def run_preview(config: PreviewConfig) -> int:
    """Exit status: 0 when every sheet was written, 1 when a video was refused (each named,
    then a summary), 2 for bad input."""
    try:
        sheets, folders = plan_sheets(config)
    except PreviewInputError as error:
        print(f"mmprep preview: {error}", file=sys.stderr)
        return 2
    # The service's settings from MMPREP_*, but the echo engine (nothing is generated), no
    # decode cache (each video is seen once), and file:// open to the source's folder only.
    # With a processor, frames are scaled to its size while decoding, so the tiles are what it sees.
    vision: VisionSettings = (
        {"processor": config.processor, "processor_resize": "ffmpeg"} if config.processor else {}
    )
    try:
        settings = Settings(
            engine="echo",
            decode_cache_bytes=0,
            allowed_local_media_path=folders,
            **vision,
            **config.url_settings(),
        )
        settings = load_resources(settings)
    except ValidationError as error:  # a wrong MMPREP_* setting
        problem = error.errors()[0]
        print(
            f"mmprep preview: {problem['loc'][0]}: {problem['msg'].removeprefix('Value error, ')}",
            file=sys.stderr,
        )
        return 2
    except SettingsError as error:  # a processor that does not load
        print(f"mmprep preview: {error.setting}: {error}", file=sys.stderr)
        return 2
    return asyncio.run(_draw_all(settings, sheets, config.sampling()))


def plan_sheets(config: PreviewConfig) -> tuple[list[Sheet], list[Path]]:
    """The sheets to draw, and the folders whose files they read."""
    source = config.source
    if "://" in source or source.startswith("data:"):
        name = "a data URL" if source.startswith("data:") else source
        default = Path(urlsplit(source).path).name if not source.startswith("data:") else ""
        return [Sheet(source, name, config.output or Path(f"{default or 'video'}.sheet.png"))], []
    path = Path(source).expanduser().resolve()
    if path.is_file():
        return [Sheet(path.as_uri(), path.name, config.output or Path(f"{path.name}.sheet.png"))], [
            path.parent
        ]
    if path.is_dir():
        videos = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
        if not videos:
            raise PreviewInputError(
                f"the folder {source!r} holds no video files ({', '.join(sorted(VIDEO_SUFFIXES))})"
            )
        folder = config.output or Path(f"{path.name}-sheets")
        if folder.exists() and not folder.is_dir():
            raise PreviewInputError(f"{str(folder)!r} is a file: for a folder of videos, -o names a folder")
        return [Sheet(video.as_uri(), video.name, folder / f"{video.name}.png") for video in videos], [path]
    raise PreviewInputError(f"{source!r} is neither a file, a folder nor a URL")


async def _draw_all(settings: Settings, sheets: list[Sheet], sampling: dict) -> int:
    service = Service(settings)
    await service.start()
    refused: list[str] = []
    try:
        for sheet in sheets:
            try:
                preview = await preview_media(service, sheet.url, sampling, sheet.title)
            except ServiceError as error:
                print(f"mmprep preview: {sheet.title}: {readable(error)} ({error.code})", file=sys.stderr)
                refused.append(f"{sheet.title} ({error.code})")
                continue
            sheet.output.parent.mkdir(parents=True, exist_ok=True)
            sheet.output.write_bytes(preview.png)
            frames = preview.account["media"][0]["shape"][0]
            print(
                f"{sheet.output}: {frames} frames of {sheet.title}, decoded in "
                f"{preview.timing['decode']:.1f} ms"
            )
    finally:
        await service.stop()
    if refused:
        print(
            f"mmprep preview: {len(sheets) - len(refused)} of {len(sheets)} drawn; not drawn: "
            f"{', '.join(refused)}",
            file=sys.stderr,
        )
    return 1 if refused else 0
