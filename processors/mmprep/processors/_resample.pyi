"""The C kernel of resize.py (_resample.c); resize.py makes every table it takes."""

from typing_extensions import Buffer

# (out_width, taps8, precision, starts, weights, pairs or None, runs or None)
Horizontal = tuple[int, int, int, Buffer, Buffer, Buffer | None, Buffer | None]
# (out_height, taps, precision, sources, weights)
Vertical = tuple[int, int, int, Buffer, Buffer]
# (out, itemsize, rows, columns, places, channel_of, table)
Layout = tuple[Buffer, int, Buffer, Buffer, Buffer, Buffer, Buffer | None]

def resample(
    pixels: Buffer,
    height: int,
    width: int,
    channels: int,
    horizontal: Horizontal | None,
    vertical: Vertical | None,
    scatter: Layout,
    /,
) -> None: ...
def use_simd(on: bool, /) -> bool: ...
