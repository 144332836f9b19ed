"""transport/json_body.py: a body of any size reads as json.loads reads it, whichever of its
paths parses it (at once on the loop; long strings cut out; a big skeleton value by value;
a huge text a piece at a time), and a long data URL where a URL goes stays the client's bytes."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.requests import Request

from mmprep.core.errors import ServiceError
from mmprep.media.data_url import DataURL
from mmprep.transport.json_body import (
    CUT_STRING,
    LONG_STRING,
    SMALL_BODY,
    SMALL_SKELETON,
    TEXT_PIECE,
    read_json_body,
)


def read(body: bytes):
    """`body` through read_json_body, as a client would send it: in 64 KiB pieces."""
    pieces = [body[start : start + 65536] for start in range(0, len(body), 65536)]

    async def receive():
        piece = pieces.pop(0) if pieces else b""
        return {"type": "http.request", "body": piece, "more_body": bool(pieces)}

    scope = {"type": "http", "method": "POST", "headers": [(b"content-type", b"application/json")]}
    return asyncio.run(read_json_body(Request(scope, receive)))


def padded(document: dict) -> bytes:
    """`document` as JSON, made longer than SMALL_BODY by a field of short strings, so it is
    parsed off the loop, long strings cut out."""
    return json.dumps({**document, "padding": ["x" * 100] * (SMALL_BODY // 100)}).encode()


def data_url(size: int) -> str:
    return "data:image/png;base64," + "A" * (size - 22)


def test_strings_of_every_length_read_as_json_loads_reads_them():
    texts = {
        f"{size}{kind}": text
        for size in (CUT_STRING - 1, CUT_STRING + 1, LONG_STRING + 1, TEXT_PIECE + 1)
        for kind, text in {
            "": "a" * size,
            "-escaped": 'say "hi"\n' + "b" * size,
            "-wide": "é€😀" * (size // 3),  # characters of 2, 3 and 4 bytes across every cut
        }.items()
    }
    body = padded({"texts": texts, "key" + "k" * CUT_STRING: "a long key"})
    assert read(body) == json.loads(body)


def test_a_long_data_url_where_a_url_goes_stays_bytes_and_nothing_else_does():
    long_url, short_url = data_url(LONG_STRING + 1), data_url(LONG_STRING)
    part = {"type": "image_url", "image_url": {"url": long_url}}
    document = read(
        padded(
            {
                "parts": [part, {"type": "image_url", "image_url": {"url": short_url}}],
                "text": long_url,  # not where a URL goes
                "escaped": {"url": long_url + "\n"},  # written with an escape
            }
        )
    )
    url = document["parts"][0]["image_url"]["url"]
    assert isinstance(url, DataURL) and bytes(url.payload) == long_url.split(",")[1].encode()
    assert document["parts"][1]["image_url"]["url"] == short_url
    assert document["text"] == long_url and document["escaped"] == {"url": long_url + "\n"}


# Short strings enough to make a skeleton too big for one json.loads call.
FILLER = (
    b'"filler": ['
    + b",".join([b'"' + b"x" * (CUT_STRING - 10) + b'"'] * (SMALL_SKELETON // (CUT_STRING - 10) + 10))
    + b"]"
)


def test_a_skeleton_too_big_for_one_parse_reads_as_json_loads_reads_it():
    """Many small values (numbers, short strings, objects): parsed value by value."""
    values = {
        "prompt": list(range(100_000, 300_000)),
        "stop": ["s"] * 10_000,
        "messages": [{"role": "user", "content": "hi"}] * 10_000,
        "numbers": [1.5, -2e-3, True, False, None],
    }
    body = b"{" + FILLER + b", " + json.dumps(values).encode()[1:]
    assert len(body) > SMALL_SKELETON
    assert read(body) == json.loads(body)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (FILLER + b', "a": 1,, "b": 2', "Expecting property name enclosed in double quotes"),
        (FILLER + b', "prompt": [1, 2 3]', "Expecting ',' delimiter"),
        (b'"text": "' + b"a" * (TEXT_PIECE + 5) + b'\x01"', "Invalid control character"),
        (b'"text": "' + b"a" * (TEXT_PIECE + 5) + b'\xff"', "not UTF-8"),
    ],
    ids=["skeleton", "numbers", "control-character", "not-utf-8"],
)
def test_a_big_body_that_is_not_json_is_refused_saying_why(fault, says):
    with pytest.raises(ServiceError) as refused:
        read(b"{" + fault + b"}")
    assert refused.value.code == "invalid_request" and says in refused.value.message


def test_a_big_body_names_the_byte_json_loads_stopped_at():
    body = b"{" + FILLER + b', "x": tru}'
    with pytest.raises(json.JSONDecodeError) as parsed:
        json.loads(body)
    with pytest.raises(ServiceError) as refused:
        read(body)
    assert f"at byte {parsed.value.pos} " in refused.value.message
