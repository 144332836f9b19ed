"""`mmprep serve --runtime ray`: the application on a Ray cluster until SIGTERM or Ctrl-C.

The cluster is the one Ray's own rules find: RAY_ADDRESS if set (`local`: a new one), else
one started on this machine by `ray start`, else a new cluster of this machine, which ends
with the command. On a cluster that outlives it, the command takes away only its own
application.
"""

from __future__ import annotations

import logging
import signal
import sys

import ray
from ray import serve

from ..core.config import Settings
from .application import PlacementError, build_app

APP_NAME = "mmprep"
log = logging.getLogger("mmprep.ray")


def run_on_ray(settings: Settings) -> int:
    ray.init(logging_level=logging.getLevelNamesMapping()[settings.log_level.upper()])
    # SIGTERM as Ctrl-C: it interrupts whatever the command waits for, starting up included
    # (a replica that cannot be placed keeps serve.run waiting), and the cleanup runs. Set
    # after ray.init, which installs a handler that aborts the process.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        app = build_app(settings)
    except PlacementError as error:
        print(f"mmprep serve: this Ray application cannot be placed: {error}", file=sys.stderr)
        ray.shutdown()
        return 2
    try:
        # Ray Serve's own proxy serves HTTP here: it gets mmprep's idle timeout, so clients
        # (not the proxy) close idle connections, as in one process (app/mmprep/transport/connections.py).
        serve.start(
            http_options={
                "host": settings.host,
                "port": settings.port,
                "keep_alive_timeout_s": int(settings.keep_alive_timeout),
            }
        )
        serve.run(app, name=APP_NAME, route_prefix="/")
        log.info("serving on Ray", extra={"url": f"http://{settings.host}:{settings.port}"})
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        serve.delete(APP_NAME)
        ray.shutdown()  # stops the cluster too if this command started it
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
