"""Where a text render's CPU goes, stage by stage, in one process: the render route's own
steps for a chat of ~8k words and one of ~64k tokens (the cases of render_server_speed.py),
each beside the same stage done another way (the library it replaced, or one it could use).

    python benchmarks/text_render_cost.py               # 40 new chats per case
    python benchmarks/text_render_cost.py --chats 200

Stages, in the route's order, each timed over the same new chats (CPU time of this
process, per chat): the body's JSON parsed; the request typed (pydantic) and made the
preprocessor's input; the chat template rendered (jinja2); the text encoded (fastokens);
the rest of the token step (pads found, the prompt made); the answer written (orjson, from
the ids' array). Beside them: the tokenizers library's encode (what encodes where fastokens
does not agree), json.dumps of the ids as a list (the answer's writer before), orjson's and
msgspec's parse of the body (where installed). What the HTTP server and the framework add
per request is not here: render_server_speed.py measures the whole server.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from render_server_speed import MODEL, text_body

from mmprep.api.common.chat_protocol import parse_chat_request
from mmprep.core.config import Settings
from mmprep.service import Service
from mmprep.vllm.request import generate_request_body

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support

from tests.support.model_folder import make_model_folder

CASES = {"text_8k": 8000, "text_64k": 40000}  # words: 40k of them come to about 64k tokens


def per_chat(work: Callable[[int], Any], chats: int) -> float:
    """CPU milliseconds per chat of `work(i)` over chats 0..chats-1 (one warm-up first)."""
    work(0)
    started = time.process_time()
    for index in range(chats):
        work(index)
    return (time.process_time() - started) / chats * 1000


def stages(
    case: str, bodies: list[bytes], service: Service, loop, renderer
) -> list[tuple[str, Callable[[int], Any]]]:
    """(name, work on chat i) for each stage of the route, then the alternatives beside them."""
    preprocessor = service.preprocessor
    options = dataclasses.replace(service.generate_options, for_generate=False)
    documents = [json.loads(body) for body in bodies]
    inputs = [parse_chat_request(document).chat_input() for document in documents]
    texts = [renderer.render_text(chat.messages, chat.template) for chat in inputs]
    prepared = [
        loop.run_until_complete(preprocessor.prepare(chat, "chatcmpl-0", threading.Event()))[0]
        for chat in inputs
    ]
    encode, tokenizer = renderer.folder.encode_ids, renderer.folder.tokenizer
    ids = [encode(text).tolist() for text in texts]
    print(f"{case:<10}{len(ids[0])} tokens, a {len(bodies[0]) // 1000} kB body")
    found = [
        ("body parsed (json, the standard library's)", lambda i: json.loads(bodies[i])),
        ("request typed (pydantic), made ChatInput", lambda i: parse_chat_request(documents[i]).chat_input()),
        (
            "template rendered (jinja2)",
            lambda i: renderer.render_text(inputs[i].messages, inputs[i].template),
        ),
        ("text encoded (fastokens)", lambda i: encode(texts[i])),
        ("token step whole (encode, pads, prompt)", lambda i: renderer.tokens(texts[i], [])),
        (
            "answer written (orjson, ids from their array)",
            lambda i: generate_request_body(prepared[i], options),
        ),
        ("  the tokenizers library's encode", lambda i: tokenizer.encode(texts[i], add_special_tokens=False)),
        ("  json.dumps of the ids as a list", lambda i: json.dumps(ids[i], separators=(",", ":")).encode()),
        ("  orjson's parse of the body", lambda i: orjson.loads(bodies[i])),
    ]
    try:  # not a dependency: measured where installed
        decoder = importlib.import_module("msgspec").json.Decoder()
        found.append(("  msgspec's parse of the body", lambda i: decoder.decode(bodies[i])))
    except ImportError:
        pass
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=40, help="new chats per case")
    args = parser.parse_args()
    folder = make_model_folder("qwen2_5_vl", Path(tempfile.mkdtemp(prefix="text-cost-")) / MODEL)
    service = Service(Settings(model=folder, served_model_name=[MODEL]))
    loop = asyncio.new_event_loop()
    loop.run_until_complete(service.start())
    renderer = service.preprocessor._renderer  # type: ignore[attr-defined]  # the route's own renderer
    assert renderer is not None
    print(f"{'case':<10}{'stage':<48}{'CPU-ms':>8}")
    for case, words in CASES.items():
        bodies = [json.dumps(text_body(words, 10_000 + i)).encode() for i in range(args.chats)]
        for name, work in stages(case, bodies, service, loop, renderer):
            print(f"{case:<10}{name:<48}{per_chat(work, args.chats):>8.3f}")
    loop.run_until_complete(service.stop())


if __name__ == "__main__":
    main()
