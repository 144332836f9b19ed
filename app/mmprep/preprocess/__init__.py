"""From a chat request to a PreparedRequest: fetch, decode (in the pool, through the cache),
and put the tensors where the parts were."""

from .cache import DecodeCache
from .parts import LocalPreprocessing, Preparer, Preprocessing
from .pool import DecodePool
from .preprocessor import Preprocessor
from .request import ChatInput, MediaPart
from .timing import Timing

__all__ = [
    "ChatInput",
    "DecodeCache",
    "DecodePool",
    "LocalPreprocessing",
    "MediaPart",
    "Preparer",
    "Preprocessing",
    "Preprocessor",
    "Timing",
]
