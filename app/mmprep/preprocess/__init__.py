"""From a chat request to a PreparedRequest: fetch, decode (in the pool, through the cache),
and put the tensors where the parts were."""

from .cache import DecodeCache
from .parts import Preprocessing
from .pool import DecodePool
from .preprocessor import Preprocessor
from .request import ChatInput
from .timing import Timing

__all__ = ["ChatInput", "DecodeCache", "DecodePool", "Preprocessing", "Preprocessor", "Timing"]
