"""`mmprep serve --runtime ray`: the application on a Ray cluster until SIGTERM or Ctrl-C.

Without RAY_ADDRESS, Ray starts a cluster of this machine for the command and stops it
after; with it, the command joins that cluster, and leaves it (and Serve on it) running
when it ends, taking only its own application away.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import ray
from ray import serve

from ..core.config import Settings
from .application import build_app

APP_NAME = "mmprep"
log = logging.getLogger("mmprep.ray")


def run_on_ray(settings: Settings) -> int:
    joined = bool(os.environ.get("RAY_ADDRESS"))
    ray.init(logging_level=settings.log_level.upper())  # RAY_ADDRESS, if set, is the cluster to join
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": settings.host, "port": settings.port})
        serve.run(build_app(settings), name=APP_NAME, route_prefix="/")
        log.info("serving", extra={"url": f"http://{settings.host}:{settings.port}", "ray": ray.get_runtime_context().gcs_address})
        stop.wait()
    finally:
        serve.delete(APP_NAME)
        if not joined:
            serve.shutdown()
            ray.shutdown()
    return 0
