"""What vLLM 0.33.0's own render app answers for messages it reads in its own way (tool
calls' arguments, tool messages, a request's chat_template, chat_template_kwargs), recorded
for tests/render/test_vllm_messages.py, which replays them on mmprep's render route without vLLM.

    VLLM_PYTHON=/path/to/bin/python .venv/bin/python tests/data/render/record_vllm_messages.py

VLLM_PYTHON runs `vllm launch render FOLDER` on the CPU (VLLM_TARGET_DEVICE=cpu; no weights are
read): a Python where vllm 0.33.0 imports with a torchvision built for its torch (recorded with
a venv whose .pth files name mmprep's .venv site-packages first, for torch 2.14.1, torchvision
0.29.1 and transformers 5.24.0, then a vllm 0.33.0 install's). The folder is the Qwen3-VL test
folder (tests/support/model_folder.py) with the tokenizer's copy of its template as
chat_template.jinja, as the published folders carry it (vLLM renders a request with tools with
the tokenizer's template only). Each case is sent twice over: to a server started plain and to
one started with --trust-request-chat-template, as the case says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.model_folder import make_model_folder
from tests.support.servers import free_port

HERE = Path(__file__).resolve().parent
OUT = HERE / "vllm_messages.json"


def folder(root: Path) -> Path:
    """The folder both sides render with (the test makes the same)."""
    made = make_model_folder("qwen3_vl", root / "Qwen3-VL-Test")
    template = json.loads((made / "chat_template.json").read_text())["chat_template"]
    (made / "chat_template.jinja").write_text(template)
    return made


def _call(arguments: str, kind: str = "function") -> dict:
    return {"id": "c1", "type": kind, "function": {"name": "get", "arguments": arguments}}


def _history(arguments: str, tool: dict | None = None) -> list[dict]:
    return [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [_call(arguments)]},
        tool or {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]


HI = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "yo"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
]
MINE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}:{% if m.content is string %}S{{ m.content }}"
    "{% else %}L{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endif %}<|im_end|>{% endfor %}"
    "{% if flavour %}{{ flavour }}{% endif %}{% if tools %}T{{ tools | length }}{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# what of chat_template_kwargs and the request's options reaches a template
READS = (
    "{% if documents %}D{{ documents | length }}{% endif %}{% if tools %}T{{ tools | length }}{% endif %}"
    "{% if add_generation_prompt %}G{% endif %}{% if reasoning_effort %}R{{ reasoning_effort }}{% endif %}"
    "{% if enable_thinking is defined %}E{{ enable_thinking }}{% endif %}"
    "{% if flavour is defined %}F{% endif %}"
)
DOCUMENTS = [{"title": "a", "text": "b"}]
# what of a message's fields reaches a template
FIELDS = (
    "{% for m in messages %}<{{ m.role }}|{{ m.foo is defined }}|{{ m.thinking is defined }}|"
    "{{ m.reasoning_content is defined }}{{ m.reasoning_content or '' }}|{{ m.tool_call_id is defined }}>"
    "{% endfor %}"
)
DEVELOPER = {"role": "developer", "content": "Answer in French."}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
# name: (trusted, the request less its model)
CASES: dict[str, tuple[bool, dict]] = {
    "arguments_object": (False, {"messages": _history('{"city": "Paris"}')}),
    "arguments_empty_object": (False, {"messages": _history("{}")}),
    "arguments_empty": (False, {"messages": _history("")}),
    "arguments_null": (False, {"messages": _history("null")}),
    "arguments_not_json": (False, {"messages": _history("not json {")}),
    "arguments_a_list": (False, {"messages": _history("[1, 2]")}),
    "tool_without_tool_call_id": (False, {"messages": _history("{}", {"role": "tool", "content": "sunny"})}),
    "tool_call_id_null": (
        False,
        {"messages": _history("{}", {"role": "tool", "tool_call_id": None, "content": "sunny"})},
    ),
    "tool_text_parts": (
        False,
        {
            "messages": _history(
                "{}",
                {
                    "role": "tool",
                    "tool_call_id": "c1",
                    "content": [{"type": "text", "text": "sun"}, {"type": "text", "text": "ny"}],
                },
            )
        },
    ),
    "tool_calls_empty": (
        False,
        {"messages": [HI[0], {"role": "assistant", "content": "yo", "tool_calls": []}]},
    ),
    "tool_call_not_a_function": (
        False,
        {"messages": [HI[0], {"role": "assistant", "content": "", "tool_calls": [_call("{}", "custom")]}]},
    ),
    "with_tools": (False, {"messages": _history("{}"), "tools": TOOLS, "tool_choice": "none"}),
    "kwargs_tokenize": (False, {"messages": HI, "chat_template_kwargs": {"tokenize": True}}),
    "untrusted_chat_template": (False, {"messages": HI, "chat_template": MINE}),
    "untrusted_kwargs_chat_template": (
        False,
        {"messages": HI, "chat_template_kwargs": {"chat_template": MINE}},
    ),
    "trusted_chat_template": (True, {"messages": HI, "chat_template": MINE}),
    "trusted_with_kwargs": (
        True,
        {"messages": HI, "chat_template": MINE, "chat_template_kwargs": {"flavour": "!"}},
    ),
    "trusted_kwargs_chat_template": (True, {"messages": HI, "chat_template_kwargs": {"chat_template": MINE}}),
    "trusted_both": (
        True,
        {"messages": HI, "chat_template": MINE, "chat_template_kwargs": {"chat_template": "{{ 'other' }}"}},
    ),
    "trusted_with_tools": (
        True,
        {"messages": HI, "chat_template": MINE, "tools": TOOLS, "tool_choice": "none"},
    ),
    "trusted_does_not_compile": (True, {"messages": HI, "chat_template": "{% for m in messages %}\n{{ m }"}),
    "trusted_not_a_string": (True, {"messages": HI, "chat_template": 3}),
    "trusted_none_given": (True, {"messages": HI}),
    "kwargs_documents": (
        True,
        {"messages": HI, "chat_template": READS, "chat_template_kwargs": {"documents": DOCUMENTS}},
    ),
    "kwargs_tools": (
        True,
        {"messages": HI, "chat_template": READS, "chat_template_kwargs": {"tools": TOOLS}},
    ),
    "kwargs_tools_over_the_requests": (
        True,
        {
            "messages": HI,
            "chat_template": READS,
            "tools": TOOLS * 2,
            "tool_choice": "none",
            "chat_template_kwargs": {"tools": TOOLS},
        },
    ),
    "kwargs_add_generation_prompt": (
        True,
        {"messages": HI, "chat_template": READS, "chat_template_kwargs": {"add_generation_prompt": False}},
    ),
    "kwargs_null_and_auto": (
        True,
        {
            "messages": HI,
            "chat_template": READS,
            "chat_template_kwargs": {"flavour": "auto", "enable_thinking": None},
        },
    ),
    "reasoning_effort": (True, {"messages": HI, "chat_template": READS, "reasoning_effort": "low"}),
    "reasoning_effort_none": (True, {"messages": HI, "chat_template": READS, "reasoning_effort": "none"}),
    "reasoning_effort_and_enable_thinking": (
        True,
        {
            "messages": HI,
            "chat_template": READS,
            "reasoning_effort": "none",
            "chat_template_kwargs": {"enable_thinking": True},
        },
    ),
    "reasoning_effort_unknown": (
        True,
        {"messages": HI, "chat_template": READS, "reasoning_effort": "extreme"},
    ),
    "kwargs_tools_folder_template": (False, {"messages": HI, "chat_template_kwargs": {"tools": TOOLS}}),
    "tool_call_without_id": (
        False,
        {
            "messages": [
                HI[0],
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": "{}"}}],
                },
            ]
        },
    ),
    "tool_call_arguments_an_object": (
        False,
        {
            "messages": [
                HI[0],
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get", "arguments": {"city": "Paris"}},
                        }
                    ],
                },
            ]
        },
    ),
    "tool_call_without_type": (
        False,
        {
            "messages": [
                HI[0],
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "function": {"name": "get", "arguments": "{}"}}],
                },
            ]
        },
    ),
    "developer_as_system": (False, {"messages": [DEVELOPER, *HI]}),
    "developer_after_system": (
        False,
        {
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                *HI[:2],
                DEVELOPER,
                HI[2],
            ]
        },
    ),
    "developer_with_tools": (
        False,
        {"messages": [{**DEVELOPER, "tools": TOOLS}, *HI], "tools": TOOLS, "tool_choice": "none"},
    ),
    "fields_that_reach_the_template": (
        True,
        {
            "chat_template": FIELDS,
            "messages": [
                {"role": "user", "content": "hi", "foo": 1, "reasoning_content": "r", "tool_call_id": "x"},
                {"role": "assistant", "content": "yo", "thinking": "t", "foo": 1},
                {"role": "assistant", "content": "yo", "reasoning_content": "rc"},
                {"role": "assistant", "content": "yo", "reasoning": "rr", "reasoning_content": "rc"},
                {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            ],
        },
    ),
}


def _serve(python: str, model: Path, port: int, trusted: bool) -> subprocess.Popen:
    args = [python, "-m", "vllm.entrypoints.cli.main", "launch", "render", str(model), "--port", str(port)]
    if trusted:
        args.append("--trust-request-chat-template")
    server = subprocess.Popen(args, env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if server.poll() is not None:
            raise SystemExit(f"vllm launch render exited with {server.returncode}")
        time.sleep(2)
    server.kill()
    raise SystemExit("vllm launch render did not answer /health within 600 s")


def main() -> None:
    python = os.environ.get("VLLM_PYTHON")
    if not python:
        raise SystemExit("set VLLM_PYTHON to a Python where vllm 0.33.0 imports (see this file's docstring)")
    version = subprocess.run(
        [python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    recorded: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        model = folder(Path(scratch))
        for trusted in (False, True):
            port = free_port()
            server = _serve(python, model, port, trusted)
            try:
                for name, (wants_trust, body) in CASES.items():
                    if wants_trust != trusted:
                        continue
                    answer = httpx.post(
                        f"http://127.0.0.1:{port}/v1/chat/completions/render",
                        json={"model": str(model), **body},
                        timeout=120,
                    )
                    recorded[name] = {"trusted": trusted, "request": body, "status": answer.status_code}
                    if answer.status_code == 200:
                        recorded[name]["token_ids"] = answer.json()["token_ids"]
                    else:
                        recorded[name]["error"] = answer.json()["error"]
                    print(f"{name}: {answer.status_code}", file=sys.stderr)
            finally:
                server.terminate()
                server.wait(60)
    OUT.write_text(json.dumps({"vllm": version, "cases": recorded}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
