"""vLLM's scale-out routes, as `vllm launch render` answers them (api_router.py): the renders
of chat, completion, Messages and Responses requests into GenerateRequests, the derenders of
what /inference/v1/generate gave back (derender_routes.py), /tokenize and /detokenize; the
frame they run in (frame.py: the model folder, the body, admission)."""
