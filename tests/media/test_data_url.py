"""data: URLs decoded as vLLM's media loaders decode them: pybase64 with validate=True."""

from __future__ import annotations

import base64

import pytest

from mmprep.media.data_url import PIECE_CHARS, DataURL
from mmprep.media.errors import InvalidMediaURLError


def test_a_payload_longer_than_a_piece_decodes_whole():
    data = bytes(range(256)) * (PIECE_CHARS // 256 + 7)
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    assert DataURL.parse(url).decode(cap=2 * len(data)) == data


@pytest.mark.parametrize(
    "payload",
    ["QUJD=", "QUJ", "QQ==QQ==", "=QUJD", "QU JD", "QUJD\n", "QUJ-", "Q"],
    ids=[
        "padding-past-the-end",
        "short",
        "padding-inside",
        "leading-padding",
        "space",
        "newline",
        "url-safe-alphabet",
        "one-character",
    ],
)
def test_base64_vllm_refuses_is_refused(payload):
    with pytest.raises(InvalidMediaURLError, match="base64 is invalid"):
        DataURL.parse(f"data:image/png;base64,{payload}").decode(cap=100)
