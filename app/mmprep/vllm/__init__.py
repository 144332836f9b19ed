"""vLLM's token-in protocol ("disaggregated everything": POST /inference/v1/generate, the
GenerateRequest that vLLM's /v1/chat/completions/render answers), spoken without vLLM or
torch.

One concept per module:
- items.py: the MultiModalKwargsItem vLLM's renderer makes of one processed image or video
  (keys, field types, slices, dtypes, shapes), per model family.
- serde.py: an item's wire form, as vLLM's encode_mm_kwargs_item writes it (msgpack,
  tensors inline, base64), and back.
- hashing.py: an item's mm_hash, as vLLM's MultiModalHasher derives it.
- sampling.py: OpenAI sampling fields -> vLLM's SamplingParams JSON.
- request.py: a PreparedRequest with a token prompt -> the GenerateRequest JSON.
- response.py: vLLM's GenerateResponse (whole or streamed) -> EngineOutput.
VllmGenerateEngine (--engine vllm-generate, app/mmprep/engines/vllm_generate.py) POSTs them, after
checking the upstream's GET /version against TESTED_VLLM_VERSIONS.

Matched against vLLM 0.33.0 (its vllm/entrypoints/scale_out/token_in_token_out/, the
former vllm/entrypoints/serve/disagg/).
"""

VLLM_VERSION = "0.33.0"  # the sources the protocol was read from and the goldens made with
# vLLM releases (major.minor) whose generate and render wire mmprep matches: 0.32's differs
# from 0.33's only by fields mmprep's requests leave out or it ignores (docs/deployment.md).
TESTED_VLLM_VERSIONS = ("0.32", "0.33")
