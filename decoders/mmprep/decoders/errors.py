"""The one exception family the decoders raise for bad input.

Each subclass carries a stable `code` that the HTTP layer returns to clients as is,
so a code, once published, never changes meaning.
"""


class MediaError(Exception):
    """The media could not be turned into frames; `str(error)` says why."""

    code = "media_error"


class InvalidArgumentError(MediaError, ValueError):
    """An argument the caller passed makes no sense: a ValueError too, as the peers and
    Python itself raise, so code written for them catches it."""

    code = "invalid_argument"


class InvalidSamplingError(InvalidArgumentError):
    code = "invalid_sampling"


class NoVideoStreamError(MediaError):
    code = "no_video_stream"


class UnsupportedCodecError(MediaError):
    code = "unsupported_codec"


class CorruptMediaError(MediaError):
    code = "corrupt_media"


class MediaTooLargeError(MediaError):
    code = "media_too_large"


class MediaNotFoundError(MediaError):
    code = "media_not_found"


class DecodeTimeoutError(MediaError):
    code = "decode_timeout"


class DecodeCancelledError(MediaError):
    """The caller cancelled the decode (its client went away)."""

    code = "cancelled"
