"""The exceptions the processors raise.

Both are ValueErrors with a stable `code`, like the decoders' MediaError, so a caller can
map them to a client error without knowing this package's internals.
"""


class ProcessorError(ValueError):
    """Something the processor was given cannot be used; `str(error)` says what."""

    code = "processor_error"


class ProcessorConfigError(ProcessorError):
    """The processor's name, folder or configuration is unusable (found at load time)."""

    code = "invalid_processor_config"


class ProcessorInputError(ProcessorError):
    """A frame stack or image the processor cannot process (wrong shape, dtype, aspect)."""

    code = "invalid_processor_input"
