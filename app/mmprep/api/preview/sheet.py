"""A contact sheet: a video MediaItem drawn as one picture, what an engine receives shown
to a person (the echo account's picture). The frames in a grid, each labelled with its
frame index and timestamp, under a header of the source's metadata and the caller's lines.

Frames are shown at the size the engine got them, only scaled down to fit a tile, never
up: a 224-pixel frame is a 224-pixel tile, so what is blurred or cut is the model's view.
Drawn with Pillow's default font (no font files to ship or download).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from ...interface.prepared import MediaItem

TILE = 256  # the longer side of a tile at most
COLUMNS = 6  # at most
MARGIN, GAP = 12, 8
FONT_SIZE = 13
LINE = 18  # pixels per line of text, the font's height and some air
LABEL = LINE + 4  # the strip under each tile
MIN_WIDTH = 640  # room for the header, even for one small tile
BACKGROUND, TEXT, MUTED = (24, 24, 27), (235, 235, 235), (150, 150, 160)


@dataclass(frozen=True)
class SheetLayout:
    """Where everything goes, decided from the frame count and size alone."""

    count: int
    tile_width: int
    tile_height: int
    columns: int
    header_lines: int

    @classmethod
    def of(cls, count: int, width: int, height: int, header_lines: int) -> SheetLayout:
        scale = min(1.0, TILE / max(width, height))
        tile_width, tile_height = max(1, round(width * scale)), max(1, round(height * scale))
        return cls(count, tile_width, tile_height, max(1, min(count, COLUMNS)), header_lines)

    @property
    def rows(self) -> int:
        return math.ceil(self.count / self.columns)

    @property
    def header_height(self) -> int:
        return MARGIN + self.header_lines * LINE + MARGIN

    @property
    def size(self) -> tuple[int, int]:
        grid_width = self.columns * self.tile_width + (self.columns - 1) * GAP
        grid_height = self.rows * (self.tile_height + LABEL) + (self.rows - 1) * GAP
        return max(MIN_WIDTH, 2 * MARGIN + grid_width), self.header_height + grid_height + MARGIN

    def tile_box(self, position: int) -> tuple[int, int, int, int]:
        """(left, top, right, bottom) of the `position`-th frame's picture."""
        row, column = divmod(position, self.columns)
        left = MARGIN + column * (self.tile_width + GAP)
        top = self.header_height + row * (self.tile_height + LABEL + GAP)
        return left, top, left + self.tile_width, top + self.tile_height


def contact_sheet(item: MediaItem, title: str, notes: list[str]) -> Image.Image:
    """`item` (a video) as a contact sheet headed by `title`, its metadata and `notes`."""
    frames = item.tensor
    if item.timestamps is None or item.indices is None:
        raise ValueError(f"{item.param}: a contact sheet needs the video's timestamps and indices")
    lines = [title, metadata_line(item.metadata), *notes]
    layout = SheetLayout.of(len(frames), frames.shape[2], frames.shape[1], len(lines))
    sheet = Image.new("RGB", layout.size, BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(FONT_SIZE)
    for number, line in enumerate(lines):
        fitted = _fit(draw, line, font, layout.size[0] - 2 * MARGIN)
        draw.text((MARGIN, MARGIN + number * LINE), fitted, font=font, fill=TEXT if number == 0 else MUTED)
    for position, frame in enumerate(frames):
        left, top, right, bottom = layout.tile_box(position)
        tile = Image.fromarray(frame)
        if tile.size != (right - left, bottom - top):
            tile = tile.resize((right - left, bottom - top), Image.Resampling.LANCZOS)
        sheet.paste(tile, (left, top))
        label = f"#{int(item.indices[position])}  {float(item.timestamps[position]):.3f} s"
        draw.text((left, bottom + 3), _fit(draw, label, font, layout.tile_width), font=font, fill=TEXT)
    return sheet


def metadata_line(metadata: dict) -> str:
    """The source as the decoder found it: codec, size, rate, duration and its source."""
    return (
        f"{metadata['codec']} in {metadata['container']}  ·  {metadata['width']}x{metadata['height']}"
        f"  ·  {metadata['fps']:.3f} fps  ·  {metadata['duration']:.3f} s"
        f" (duration from: {metadata['duration_source']})"
        f"  ·  {metadata['num_frames']} frames"
    )


def png_bytes(picture: Image.Image) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, "PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def _fit(draw: ImageDraw.ImageDraw, text: str, font, width: int) -> str:
    """`text`, cut with an ellipsis where it would run past `width` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"
