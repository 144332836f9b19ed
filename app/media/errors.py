"""Why a media URL could not be fetched. MediaError subclasses, so the API maps them
like decoding errors: 400, with the code in the body."""

from decoders.errors import MediaError


class InvalidMediaURLError(MediaError):
    code = "invalid_media_url"


class MediaFetchError(MediaError):
    code = "media_fetch_failed"


class MediaForbiddenError(MediaError):
    code = "media_forbidden"
