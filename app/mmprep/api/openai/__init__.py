"""OpenAI's client APIs (api_router.py): chat completions (the chat pipeline itself,
common/chat.py), legacy completions (completions.py) and the Responses API (responses.py,
its answers and events; its request is common/responses_protocol.py)."""
