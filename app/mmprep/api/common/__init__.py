"""What the endpoint families share, below them all (no family imports another's modules):
the client APIs' requests, typed (chat_protocol.py, content.py, completion_protocol.py) or
turned into the chat request (messages_protocol.py, responses_protocol.py, with
translation.py's field names); the chat pipeline every client API runs through and its
admission frame (chat.py); the answers' builders and SSE framing (chat_answers.py); request
validation (validation.py) and the model a request names (served_model.py); the error
answers (errors.py); and the Service a route is handed (dependencies.py)."""
