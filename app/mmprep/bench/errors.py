"""The one error the benchmark commands report to the user as a line, not a traceback."""


class BenchError(Exception):
    """Bad input or an unreachable target: the command stops with this message, status 2."""
