"""Structured logs: one JSON object per line, with the request id when there is one.
Media bytes never reach a log line (URLs are shortened, data URLs cut at the comma)."""

from __future__ import annotations

import json
import logging
import logging.config
import time
from contextvars import ContextVar

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

# LogRecord's own attributes, and uvicorn's ANSI-coloured duplicate of the message.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = request_id_var.get()
        if request_id:
            entry["request_id"] = request_id
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class NoStartupTraceback(logging.Filter):
    """Drops uvicorn's copy of a StartupError's traceback: mmprep has logged the error on one
    line (core/lifespan.py), which says what to change; the stack says nothing more."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "uvicorn.error" and "core.lifespan.StartupError: " in record.getMessage())


def configure_logging(level: str) -> dict:
    """Set up mmprep's and uvicorn's loggers; returns uvicorn's log_config."""
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "json",
        "stream": "ext://sys.stderr",
        "filters": ["startup"],
    }
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "filters": {"startup": {"()": NoStartupTraceback}},
        "handlers": {"default": handler},
        "loggers": {
            "mmprep": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }
    logging.config.dictConfig(config)
    return config
