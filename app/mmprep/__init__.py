"""mmprep: the OpenAI-compatible service, media fetching and engines."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mmprep")  # one source: pyproject.toml's version, as installed
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
