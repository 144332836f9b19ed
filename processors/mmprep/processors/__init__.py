"""Vision processors for the Qwen-VL models in numpy: frames resized to the model's grid,
rescaled, normalized and patchified exactly as transformers does it; each family's defaults
and sizing rule are its module's in mmprep.families. Knows numpy and Pillow, nothing of HTTP
or FFmpeg."""

from .config import FAMILIES, IGNORED_KEYS, KNOWN_KEYS, ProcessorConfig
from .dtypes import BFLOAT16, FLOAT_DTYPES, as_float32, cast, is_float, round_to_bfloat16, torch_name
from .errors import ProcessorConfigError, ProcessorError, ProcessorInputError
from .loading import PRESETS, load_processor, preset_models
from .patches import ProcessedMedia
from .processor import Processor

__all__ = [
    "BFLOAT16",
    "FAMILIES",
    "FLOAT_DTYPES",
    "IGNORED_KEYS",
    "KNOWN_KEYS",
    "PRESETS",
    "ProcessedMedia",
    "Processor",
    "ProcessorConfig",
    "ProcessorConfigError",
    "ProcessorError",
    "ProcessorInputError",
    "as_float32",
    "cast",
    "is_float",
    "load_processor",
    "preset_models",
    "round_to_bfloat16",
    "torch_name",
]
