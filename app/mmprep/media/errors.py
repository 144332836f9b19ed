"""Why a media URL could not be fetched: 400s with a stable code, in the service's own
error family (the decoders' MediaError is the library's, for what FFmpeg and Pillow find)."""

from ..core.errors import ServiceError


class MediaFetchError(ServiceError):
    code = "media_fetch_failed"


class InvalidMediaURLError(MediaFetchError):
    code = "invalid_media_url"


class MediaForbiddenError(MediaFetchError):
    code = "media_forbidden"


class FetchTooLargeError(MediaFetchError):
    code = "media_too_large"


class LocalFileNotFoundError(MediaFetchError):
    code = "media_not_found"
