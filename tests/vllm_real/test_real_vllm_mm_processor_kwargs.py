"""--mm-processor-kwargs and a request's own mm_processor_kwargs, live against vLLM 0.33's
`vllm launch render` started with the same flag: the same chats to both, every render field
compared (token ids, placeholders, the images' mm_hashes, each tensor). Skipped, saying why,
where the render venv is absent (scripts/vllm_venv.sh)."""

from __future__ import annotations

import json

import pytest

from tests.support.model_folder import make_model_folder
from tests.vllm_real.real_vllm import (
    NORMALIZE,
    RENDER_VENV,
    as_generate_takes,
    camera_jpeg,
    chat_body,
    differences,
    missing_venv,
    mmprep_server,
    model_folder,
    render,
    render_fields,
    vllm_render,
)

pytestmark = pytest.mark.slow
if reason := missing_venv(RENDER_VENV):
    pytest.skip(reason, allow_module_level=True)

# Each server's --mm-processor-kwargs, and the requests' own keys asked of it.
SERVERS = {
    "flat": {"max_pixels": 200704},
    "scoped": {"max_pixels": 200704, "videos_kwargs": {"max_pixels": 50176}},
}
REQUESTS = {
    "the server's": None,
    "a flat key": {"max_pixels": 50000},
    "the image's scope": {"images_kwargs": {"min_pixels": 100352, "max_pixels": 401408}},
    "a size under the server's bound": {"size": {"shortest_edge": 3136, "longest_edge": 100352}},
    "a floor over the server's bound": {"min_pixels": 401408},
    "a flat key and the video's scope": {"max_pixels": 50000, "videos_kwargs": {"max_pixels": 20000}},
}
# vLLM 0.33 routes a flat key out of the flat namespace when a scope names it (here the
# server's videos_kwargs.max_pixels), and an image then keeps the server's max_pixels; mmprep
# gives the image the request's flat max_pixels, as every other combination does in both.
DIFFERS = {("scoped", "a flat key"): "vLLM 0.33 drops a flat key that a scope names"}


@pytest.fixture(
    scope="module", params=[(f, s) for f in ("qwen2_vl", "qwen2_5_vl") for s in SERVERS], ids="-".join
)
def servers(request, tmp_path_factory):
    (family, server), mode = request.param, "normalize"
    folder = make_model_folder(family, tmp_path_factory.mktemp("models") / f"tiny-{family}")
    flag = ["--mm-processor-kwargs", json.dumps(SERVERS[server])]
    with (
        vllm_render(folder, mode, *flag) as vllm,
        mmprep_server(folder, None, normalize=NORMALIZE[mode], mm_processor_kwargs=SERVERS[server]) as mmprep,
    ):
        yield server, folder, vllm.url, mmprep


@pytest.mark.parametrize("case", REQUESTS)
def test_the_processor_options_render_as_vllms(servers, case):
    server, folder, vllm, mmprep = servers
    if server == "scoped" and case not in ("the server's", "a flat key", "the image's scope"):
        pytest.skip("asked of the flat server")
    body = chat_body(str(folder), "png")
    body["messages"] = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": camera_jpeg(3)}}]}
    ]
    if REQUESTS[case] is not None:
        body["mm_processor_kwargs"] = REQUESTS[case]
    theirs, ours = render_fields(render(vllm, body)), render_fields(render(mmprep, body))
    if (server, case) in DIFFERS:  # the difference is still there: the docs say it
        assert differences(ours, theirs) != [], DIFFERS[server, case]
    else:
        assert differences(ours, theirs) == []


@pytest.mark.parametrize("budget", [None, 70, 1120])
def test_gemma4s_soft_token_budget_per_request_renders_as_vllms(budget):
    """Gemma 4 sizes an image to its max_soft_tokens; vLLM's processor takes a request's own
    (here 70 and 1120 over the folder's 280), and so does mmprep's."""
    folder = model_folder("gemma4")
    body = chat_body(str(folder), "png")
    body["messages"] = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": camera_jpeg(3)}}]}
    ]
    if budget is not None:
        body["mm_processor_kwargs"] = {"max_soft_tokens": budget}
    with vllm_render(folder, "default") as vllm, mmprep_server(folder, None, normalize=None) as mmprep:
        theirs, ours = render_fields(render(vllm.url, body)), render_fields(render(mmprep, body))
    # the range as mmprep writes it for vLLM's generate: the soft tokens' run (BRACKETED)
    assert differences(ours, as_generate_takes(theirs, folder, "gemma4")) == []
    assert ours["mm_placeholders"]["image"][0]["length"] == budget or 280
