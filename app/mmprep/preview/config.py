"""What `mmprep preview` takes: a video, a folder of videos or a URL, the sampling, where to write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import CliPositionalArg


class PreviewConfig(BaseModel):
    """Draw the frames the service would sample from a video as one contact sheet (PNG).

    The service's own settings (limits, which networks URLs may reach) come from its MMPREP_*
    environment variables, as for `mmprep serve`, and its URL switches are flags here too
    (the command's --help, in app/mmprep/cli.py, says what its exit status means)."""

    model_config = ConfigDict(extra="forbid")

    source: CliPositionalArg[str] = Field(
        description="a video file, a folder of videos (one sheet each), or a URL (http(s), data:)"
    )
    output: Path | None = Field(
        None,
        validation_alias=AliasChoices("o", "output"),
        description="the PNG to write; for a folder, the folder to write one PNG per video into "
        "(default: NAME.sheet.png, or FOLDER-sheets/)",
    )
    fps: float | None = Field(None, description="frames per second to sample, as a video_url part's fps")
    num_frames: int | None = Field(
        None, description="frames to sample evenly, as a video_url part's num_frames"
    )
    max_frames: int | None = Field(None, description="most frames, as a video_url part's max_frames")
    processor: str | None = Field(
        None,
        description="a model's vision processor (family, preset model id or folder, as mmprep serve's): "
        "tiles at the size it resizes frames to, and its token count in the header",
    )

    allow_private_networks: bool = Field(
        False, description="let URLs reach loopback, private and link-local addresses, as mmprep serve's flag"
    )
    allowed_media_domains: list[str] = Field(
        [],
        description="if set, URLs may only name these hosts (and their subdomains), as mmprep serve's flag",
    )

    @model_validator(mode="after")
    def _one_way_to_sample(self) -> PreviewConfig:
        if self.fps is not None and self.num_frames is not None:
            raise ValueError("give --fps or --num-frames, not both")
        return self

    def url_settings(self) -> dict[str, Any]:
        """The URL switches given here, laid over the service's MMPREP_* settings."""
        given = {
            "allow_private_networks": self.allow_private_networks or None,
            "allowed_media_domains": self.allowed_media_domains or None,
        }
        return {key: value for key, value in given.items() if value is not None}

    def sampling(self) -> dict[str, Any]:
        """The sampling keys of the video_url part, as a client would send them."""
        keys = {"fps": self.fps, "num_frames": self.num_frames, "max_frames": self.max_frames}
        return {key: value for key, value in keys.items() if value is not None}
