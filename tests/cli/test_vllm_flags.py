"""`vllm serve`'s command line on `mmprep serve` (app/mmprep/vllm_flags.py): the table in
docs/vllm-flags.md is what scripts/vllm_serve_flags.py writes now, every flag does what its row
says, and none ends as argparse's "unrecognized arguments"."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmprep import vllm_flags
from mmprep.cli import Serve, main
from mmprep.core.config import Settings
from mmprep.vllm_flags import ALWAYS, FRONT_DOOR, NOTES, RENAMED, TAKEN, VllmFlagRefused, from_vllm

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = vllm_flags.VLLM_FLAGS["flags"]


def test_the_table_is_the_scripts_and_names_every_flag_once():
    assert (ROOT / "docs" / "vllm-flags.md").read_text() == vllm_flags.flag_table(), (
        "regenerate it: python scripts/vllm_serve_flags.py table"
    )
    firsts = [entry["flags"][0] for entry in ENTRIES]
    assert len(firsts) == len(set(firsts)) == 320
    named = {*TAKEN, *ALWAYS, *RENAMED, *FRONT_DOOR, *NOTES}
    assert named <= set(firsts), f"names vLLM 0.33 has not: {named - set(firsts)}"


def test_each_taken_flag_is_a_setting_of_that_name_and_a_renamed_one_of_mmpreps():
    for flag in TAKEN:
        assert flag[2:].replace("-", "_") in Serve.model_fields, flag
    for target in RENAMED.values():
        assert target[2:].replace("-", "_") in Settings.model_fields, target
        assert "vllm serve's" in (Settings.model_fields[target[2:].replace("-", "_")].description or "")


def test_every_flag_of_the_engine_or_vllms_front_door_is_refused_naming_it():
    refused = [entry for entry in ENTRIES if vllm_flags.disposition(entry) in ("engine", "front door")]
    # issue 51 took --revision, --generation-config, --return-tokens-as-token-ids; issue 45 --dtype
    assert len(refused) == 280
    for entry in refused:
        for spelling in (*entry["flags"], *entry["short"]):
            args = [spelling, "1"] if entry["value"] else [spelling]
            with pytest.raises(VllmFlagRefused) as error:
                from_vllm(args)
            (line,) = error.value.lines
            assert line.startswith(f"mmprep serve: {spelling} is "), line
            if vllm_flags.disposition(entry) == "engine":
                assert "the engine's" in line and "vllm serve behind mmprep" in line


def test_vllms_spellings_become_mmpreps():
    assert from_vllm(["Qwen/Qwen3-VL-8B-Instruct", "--port", "9000"]) == [
        "--model",
        "Qwen/Qwen3-VL-8B-Instruct",
        "--port",
        "9000",
    ]
    assert from_vllm(["--port", "9", "/models/qwen", "--enable-auto-tool-choice"]) == [
        "--port",
        "9",
        "--model",
        "/models/qwen",
        "--enable-auto-tool-choice",
    ]
    # a list flag's values are not the model (argparse's nargs="+"), a boolean takes none
    assert from_vllm(["--served-model-name", "a", "b"]) == ["--served-model-name", "a", "b"]
    assert from_vllm(["--enable-auto-tool-choice", "folder"]) == [
        "--enable-auto-tool-choice",
        "--model",
        "folder",
    ]
    assert from_vllm(["--disable-auto-tool-choice", "--no-trust-request-chat-template"]) == [
        "--no-enable-auto-tool-choice",
        "--no-trust-request-chat-template",
    ]
    assert from_vllm(["-asc", "4", "--mm-hasher-algorithm=sha256", "--max_model_len", "32k"]) == [
        "--processes",
        "4",
        "--upstream-mm-hasher=sha256",
        "--max-model-len",
        "32k",
    ]
    assert from_vllm(["--trust-request-mm-kwargs", "--enable-log-requests", "--host", "0.0.0.0"]) == [
        "--host",
        "0.0.0.0",
    ]


def test_the_command_refuses_engine_flags_all_at_once_without_argparses_words(capsys):
    status = main(["serve", "model", "-tp", "2", "--gpu-memory-utilization=0.9", "-O3", "--enforce-eager"])
    err = capsys.readouterr().err
    assert status == 2
    assert "unrecognized arguments" not in err
    lines = err.splitlines()
    assert [line.split(" is ")[0] for line in lines] == [
        "mmprep serve: -tp",
        "mmprep serve: --gpu-memory-utilization",
        "mmprep serve: --optimization-level",
        "mmprep serve: --enforce-eager",
    ]
    assert "vLLM's ParallelConfig" in lines[0]


def test_help_says_which_flags_are_vllms(capsys):
    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in sorted(TAKEN - {"--model", "--host", "--port", "--served-model-name"}):
        assert flag in text, flag
    for flag in ("--api-key", "--limit-mm-per-prompt", "--chat-template", "--processes"):
        assert f"vllm serve's {flag if flag != '--processes' else '--api-server-count'}" in text


@pytest.mark.parametrize(
    ("given", "length"),
    [
        ("32k", 32000),
        ("25.6k", 25600),
        ("1K", 1024),
        ("2M", 2 * 2**20),
        ("auto", None),
        ("-1", None),
        (512, 512),
    ],
)
def test_max_model_len_is_read_as_vllm_reads_it(tmp_path, given, length):
    assert Settings(model=tmp_path, max_model_len=given).max_model_len == length


def test_log_level_in_vllms_case_and_limits_checked():
    assert Settings(log_level="DEBUG").log_level == "debug"
    with pytest.raises(ValueError, match="image: -1 is not a count"):
        Settings(limit_mm_per_prompt={"image": -1})
    assert Settings(limit_mm_per_prompt={"video": {"count": 2, "num_frames": 8}}).mm_limit("video") == 2
    with pytest.raises(ValueError, match="only applies with --model"):
        Settings(chat_template="{{ messages }}")
