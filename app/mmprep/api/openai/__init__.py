"""OpenAI's client APIs: chat completions (chat.py, its request typed in chat_protocol.py, its
answers built in chat_answers.py), legacy completions (completions.py) and the Responses API
(responses.py, a translation to and from the chat pipeline)."""
