"""Errors the service reports to clients, whatever layer finds them."""

from __future__ import annotations

from decoders.errors import MediaError


class RequestError(Exception):
    """The request itself is wrong: 400 (or `status`) with an OpenAI error body."""

    def __init__(self, message: str, code: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.code, self.param, self.status = message, code, param, status


class MediaPartError(Exception):
    """A MediaError, and the part of the request it is about."""

    def __init__(self, error: MediaError, param: str):
        super().__init__(f"{param}: {error}")
        self.error, self.param = error, param
