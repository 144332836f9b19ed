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
- engine.py: VllmGenerateEngine (--engine vllm-generate), which POSTs them.

Matched against vLLM 0.33.0 (its vllm/entrypoints/scale_out/token_in_token_out/, the
former vllm/entrypoints/serve/disagg/).
"""

VLLM_VERSION = "0.33.0"
