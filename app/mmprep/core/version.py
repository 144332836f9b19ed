"""mmprep's version: pyproject.toml's, as installed (`mmprep` is a namespace package over
the four source roots, so it has no __init__ to hold it)."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("mmprep")
except PackageNotFoundError:  # run from a checkout that was never installed
    VERSION = "0+unknown"
