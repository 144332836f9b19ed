"""API keys (`--api-key`, or VLLM_API_KEY), as vllm serve's AuthenticationMiddleware, and wider.

A request must carry one of the keys as `Authorization: Bearer KEY` (OpenAI's clients) or
`x-api-key: KEY` (Anthropic's), else it is answered 401 before any route runs: in Anthropic's
error shape on `/v1/messages`, in OpenAI's everywhere else. Each key is compared with every
configured one in constant time (their SHA-256 digests through `hmac.compare_digest`, all of
them, whatever matched), so neither the answer's timing nor its length tells how much of a
guess was right.

Where vLLM guards only the paths under /v1, /v2, /inference and /cohere, mmprep guards every
path but the probes and read-outs that do no work and reveal nothing of a request
(`OPEN_PATHS`): so /tokenize, /detokenize, the preview and any route added later need the key
too. As vLLM, OPTIONS (a browser's CORS preflight, which carries no credentials) passes, and
the path is read without the --root-path prefix.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable

from ..core.errors import ServiceError
from .common.messages_protocol import error_type

OPEN_PATHS = frozenset({"/health", "/ready", "/metrics", "/version", "/load"})
ANTHROPIC_PATHS = ("/v1/messages",)  # and what is under it


def unauthorized() -> ServiceError:
    return ServiceError(
        "this server needs an API key: send one of its keys as 'Authorization: Bearer KEY' "
        "(or 'x-api-key: KEY')",
        "invalid_api_key",
        status=401,
    )


def _digest(key: str | bytes) -> bytes:
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).digest()


class ApiKeys:
    """ASGI middleware: a request without one of `keys` gets a 401 (`on_refused` counts it)."""

    def __init__(self, app, keys: list[str], on_refused: Callable[[ServiceError], None] = lambda error: None):
        if not keys:
            raise ValueError("ApiKeys needs at least one key")
        self.app, self.on_refused = app, on_refused
        self.digests = [_digest(key) for key in keys]

    def holds_a_key(self, headers: dict[bytes, bytes]) -> bool:
        offered = []
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() == b"bearer":
            offered.append(token.strip())
        if b"x-api-key" in headers:
            offered.append(headers[b"x-api-key"].strip())
        match = False
        for candidate in offered:
            digest = _digest(candidate)
            for known in self.digests:
                match |= hmac.compare_digest(digest, known)
        return match

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return await self.app(scope, receive, send)
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if path in OPEN_PATHS or self.holds_a_key(dict(scope["headers"])):
            return await self.app(scope, receive, send)
        error = unauthorized()
        self.on_refused(error)
        if path == ANTHROPIC_PATHS[0] or path.startswith(tuple(p + "/" for p in ANTHROPIC_PATHS)):
            body = {"type": "error", "error": {"type": error_type(error.status), "message": error.message}}
        else:
            body = error.body()
        if scope["type"] == "websocket":  # no such route today; closed as a refusal would be
            return await send({"type": "websocket.close", "code": 1008})
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
