"""vLLM's scale-out routes, as `vllm launch render` answers them: the renders of chat,
completion, Messages and Responses requests into GenerateRequests, the derenders of what
/inference/v1/generate gave back (derender_routes.py), /tokenize and /detokenize; what they
share (common.py: the model folder, the body, admission; validation.py: bodies as 400s)."""
