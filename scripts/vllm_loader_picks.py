"""What vLLM 0.33's video loaders take of each video fixture: for each file and each loader
(`qwen2_vl`: Qwen2-VL and Qwen2.5-VL; `qwen3_vl`: Qwen3-VL and Qwen3.5, at 2 fps, their
default; `opencv`, its plain VideoBackend for the other families, at its 32 frames, what a
request that asks nothing gets), the frame indices, transformers' metadata as the loader writes it,
and a digest of each frame's RGB bytes; and what OpenCV's capture, opened as vLLM opens it,
reports of each file (`opencv`: its frame count, its rate, and where it says it stands after
the seek to the end that vLLM's cross-check makes). JSON on stdout. It runs in the vLLM venv (vLLM,
OpenCV and numpy; no mmprep), so it imports nothing of this repository:

    bash scripts/vllm_venv.sh        # once
    .venv-vllm-render/bin/python scripts/vllm_loader_picks.py > tests/data/vllm_real/loader_picks.json

tests/preprocess/test_loader_picks.py checks mmprep's picks against the file, and against
this script's live answer where the venv is there (slow).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
logging.disable(logging.WARNING)  # vLLM's own notes on short reads: the answer says them

import cv2  # noqa: E402
from vllm.multimodal.video import Qwen2VLVideoBackend, Qwen3VLVideoBackend, VideoBackend  # noqa: E402
from vllm.multimodal.video_decoders.opencv import OpenCVVideoBackendMixin  # noqa: E402

MEDIA = Path(__file__).resolve().parents[1] / "tests" / "data" / "media"
FPS = 2
PLAIN_FRAMES = 32  # vLLM's VideoMediaIO default
LOADERS = {
    "qwen2_vl": (Qwen2VLVideoBackend, {"fps": FPS}),
    "qwen3_vl": (Qwen3VLVideoBackend, {"fps": FPS}),
    "opencv": (VideoBackend, {"num_frames": PLAIN_FRAMES}),
}


def loader_answer(loader, kwargs: dict, data: bytes) -> dict:
    """One loader's frames of one file, or the error it raised."""
    try:
        frames, metadata = loader.load_bytes(data, **kwargs)
    except Exception as error:  # a file OpenCV cannot open: what vLLM answers is an error too
        return {"error": f"{type(error).__name__}: {error}"}
    return {
        "indices": metadata["frames_indices"],
        "total_num_frames": metadata["total_num_frames"],
        "fps": metadata["fps"],
        "duration": metadata["duration"],
        "frames": [hashlib.sha256(frame.tobytes()).hexdigest()[:16] for frame in frames],
    }


def opencv_answer(data: bytes) -> dict:
    """CAP_PROP_FRAME_COUNT, CAP_PROP_FPS and CAP_PROP_POS_FRAMES after seeking to ratio 1.0."""
    stream = io.BytesIO(data)  # held until release(): OpenCV's binding does not own it
    cap = cv2.VideoCapture(stream, OpenCVVideoBackendMixin.get_cv2_video_api(), [])
    if not cap.isOpened():
        return {"error": "Could not open video stream"}
    answer = {"frame_count": int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), "fps": cap.get(cv2.CAP_PROP_FPS)}
    if cap.set(cv2.CAP_PROP_POS_AVI_RATIO, 1.0):
        answer["end_seek_frames"] = int(cap.get(cv2.CAP_PROP_POS_FRAMES))
    cap.release()
    return answer


def main(names: list[str]) -> None:
    paths = [MEDIA / name for name in names] or sorted(
        path for path in MEDIA.iterdir() if path.suffix in (".mp4", ".webm", ".avi", ".mkv")
    )
    answers = {
        path.name: {name: loader_answer(*loader, path.read_bytes()) for name, loader in LOADERS.items()}
        for path in paths
    }
    opencv = {path.name: opencv_answer(path.read_bytes()) for path in paths}
    json.dump(
        {"vllm": "0.33.0", "fps": FPS, "plain_frames": PLAIN_FRAMES, "files": answers, "opencv": opencv},
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
