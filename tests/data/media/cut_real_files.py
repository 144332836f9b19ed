"""Cut the real-world video fixtures (real_*) out of files that no test here made, by
stream copy: the encoder's packets stay as they were, only fewer of them, in a new
container of the same kind. REAL_FILES.md says where each comes from and its licence.

    apt-get download opencv-doc && dpkg-deb -x opencv-doc_*.deb SRC
    python tests/data/media/cut_real_files.py SRC

then record what vLLM's loaders take of them (scripts/vllm_loader_picks.py).
"""

from __future__ import annotations

import gzip
import io
import itertools
import sys
from pathlib import Path

import av

HERE = Path(__file__).resolve().parent
OPENCV_DOC = Path("usr/share/doc/opencv-doc")
# fixture name: (file in the extracted package, packets kept from the start)
CUTS = {
    # MPEG-4 Part 2 (DivX-style) with packed B-frames: the decoder shows frames in an order
    # the AVI's timestamps do not
    "real_packed_bframes_mpeg4.avi": (OPENCV_DOC / "examples/data/Megamind.avi", 120),
    # H.264 whose first IDR carries a non-intra slice and whose MP4 gives every frame its
    # decode time: the decoder reorders what the timestamps keep in order
    "real_damaged_idr_h264.mp4": (OPENCV_DOC / "opencv4/html/box.mp4.gz", 150),
    # Cinepak with dropped frames: 68 frames over a 444-frame AVI timeline, so OpenCV's
    # seek to the end lands far past what plays
    "real_dropped_frames_cinepak.avi": (OPENCV_DOC / "examples/data/tree.avi", 30),
}


def cut(data: bytes, target: Path, packets: int) -> None:
    """The first `packets` of the video stream in `data`, in a container of the kind the
    target's suffix names."""
    with av.open(io.BytesIO(data), "r") as source, av.open(str(target), "w") as out:
        stream = source.streams.video[0]
        copy = out.add_stream_from_template(stream)
        taken = itertools.islice(
            (packet for packet in source.demux(stream) if packet.dts is not None), packets
        )
        for packet in taken:
            packet.stream = copy
            out.mux(packet)


def main(root: Path) -> None:
    for name, (path, packets) in CUTS.items():
        data = (root / path).read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        cut(data, HERE / name, packets)
        print(name, (HERE / name).stat().st_size)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
