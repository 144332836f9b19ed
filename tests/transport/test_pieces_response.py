"""A render answer's pieces go out as they are: the big ones (the encoded tensors) never
copied into one body, the small ones joined into one write."""

from __future__ import annotations

from mmprep.transport.pieces_response import PiecesResponse
from mmprep.vllm.request import SMALL_PIECE_BYTES, coalesced


def test_big_pieces_pass_uncopied_and_small_runs_are_joined():
    big, other = b"x" * SMALL_PIECE_BYTES, b"y" * (3 * SMALL_PIECE_BYTES)
    pieces = [b"{", b'"a":', b'"', big, b'"', b",", b'"', other, b'"}']
    out = list(coalesced(pieces))
    assert b"".join(out) == b"".join(pieces)
    assert out[1] is big and out[3] is other  # the same objects: no copy of 4 x 64 KiB
    assert out[0] == b'{"a":"' and out[2] == b'","' and out[4] == b'"}'
    assert list(coalesced([])) == [] and list(coalesced([b"a", b"b"])) == [b"ab"]


def test_the_content_length_is_the_pieces_total():
    response = PiecesResponse([b"ab", b"c" * SMALL_PIECE_BYTES], media_type="application/json")
    assert response.headers["content-length"] == str(2 + SMALL_PIECE_BYTES)
    assert response.headers["content-type"] == "application/json"
