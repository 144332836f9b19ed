"""The application: the three deployments bound with the options mmprep's settings give,
for `mmprep serve --runtime ray` and for Ray's own `serve run` and config files."""

from __future__ import annotations

import _thread
import logging
import signal
import sys
import threading
import time
from typing import Any

import ray
from ray import serve
from ray.serve import Application

from ..core.config import Settings
from .replicas import DecodeReplica, EngineReplica, FrontDoor

# The deployments, by the names Ray and --ray-deployment-options know them by (the settings
# check those names: core.config.RAY_DEPLOYMENTS, held to these by a test).
DEPLOYMENTS = {"FrontDoor": FrontDoor, "Decode": DecodeReplica, "Engine": EngineReplica}

# Room beyond --max-concurrent-requests for the front door's own answers: /health, /metrics,
# and the 503s of admission, which must reach the front door to be given.
FRONT_DOOR_SPARE = 16
# CPUs each replica reserves unless the operator says otherwise: the front door parses and
# routes, a decode replica decodes; an engine's needs are the operator's (GPUs, usually).
# So all three fit on a machine of two cores.
CPUS = {"FrontDoor": 1, "Decode": 1, "Engine": 0}
# How long Ray's `serve run` may take to start Ray after it built the application.
RAY_START_WAIT_S = 120.0
# The signal that stops Ray's `serve run` as Ctrl-C would when the application cannot be placed
# (its handler raises KeyboardInterrupt in the main thread, which `serve run` shuts Serve down
# on). Not SIGINT: a command started in the background ignores SIGINT, and then neither a
# SIGINT nor _thread.interrupt_main() reaches it; not SIGTERM: ray.init, which `serve run`
# calls after building the application, installs its own handler for it.
STOP_SIGNAL = signal.SIGUSR2

log = logging.getLogger("mmprep.rayserve")


class PlacementError(ValueError):
    """The deployments ask for more than the cluster has: Ray would wait for resources that
    never come (logging every 30 s, requests hanging), so mmprep refuses at once instead."""


def build_app(settings: Settings) -> Application:
    if ray.is_initialized():  # mmprep serve --runtime ray, and Ray's own serve run / deploy
        check_placement(settings, ray.cluster_resources())
    made = {
        name: serve.deployment(name=name)(replica).options(**deployment_options(settings, name))
        for name, replica in DEPLOYMENTS.items()
    }
    return made["FrontDoor"].bind(settings, made["Decode"].bind(settings), made["Engine"].bind(settings))


def build(args: dict[str, Any]) -> Application:
    """For `serve run mmprep.rayserve.application:build key=value ...` and `import_path` in a
    config file: `args` are mmprep's settings (MMPREP_* variables apply too). Host and port
    are then Ray's (http_options), and Ray's config file may override any deployment."""
    settings = Settings(**{"runtime": "ray", **args})
    if not ray.is_initialized():  # Ray's `serve run` builds the application first, then starts Ray
        check_placement_once_ray_starts(settings)
    return build_app(settings)


def check_placement_once_ray_starts(settings: Settings) -> None:
    """check_placement as soon as Ray is up, from a thread: one that cannot be placed stops
    `serve run` at once, as Ctrl-C would (Serve shut down), after saying why, whether or not
    the command was started where SIGINT is ignored (in the background)."""
    stop = _stopper()

    def watch() -> None:
        deadline = time.monotonic() + RAY_START_WAIT_S
        while not ray.is_initialized():
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        try:
            check_placement(settings, ray.cluster_resources())
        except PlacementError as error:
            print(f"mmprep: {error}", file=sys.stderr, flush=True)
            stop()
        except Exception:  # a cluster that cannot say what it has: Ray will report it its own way
            log.warning("could not check the replicas' placement", exc_info=True)

    threading.Thread(target=watch, name="mmprep-placement-check", daemon=True).start()


def _stopper():
    """How the watching thread stops the main thread as Ctrl-C would: STOP_SIGNAL sent to it,
    its handler (installed here, from the main thread, where the signal has none of its own)
    raising KeyboardInterrupt; else, built elsewhere than in the main thread,
    _thread.interrupt_main() (which does nothing where SIGINT is ignored)."""
    main = threading.main_thread()
    if threading.current_thread() is not main or signal.getsignal(STOP_SIGNAL) != signal.SIG_DFL:
        return _thread.interrupt_main

    def interrupted(signum, frame) -> None:
        raise KeyboardInterrupt

    signal.signal(STOP_SIGNAL, interrupted)
    assert main.ident is not None  # started: it is running this
    return lambda: signal.pthread_kill(main.ident, STOP_SIGNAL)


def deployment_options(settings: Settings, name: str) -> dict[str, Any]:
    """Replicas and requests in flight per replica from mmprep's settings, then the
    operator's own Ray options for this deployment laid over them."""
    s = settings
    own = dict(s.ray_deployment_options.get(name, {}))
    actor_options = {"num_cpus": CPUS[name], **own.pop("ray_actor_options", {})}
    if name == "FrontDoor":
        options = {
            "num_replicas": s.ray_front_door_replicas,
            "max_ongoing_requests": s.max_concurrent_requests + FRONT_DOOR_SPARE,
        }
    elif name == "Decode":
        # Twice the decodes a replica runs at once, so its next fetches overlap its decodes.
        options = _replicas(s.ray_decode_replicas, s.ray_max_decode_replicas, target=s.decode_workers)
        options["max_ongoing_requests"] = 2 * s.decode_workers
    else:
        options = _replicas(s.ray_engine_replicas, s.ray_max_engine_replicas, target=None)
        options["max_ongoing_requests"] = s.max_concurrent_requests
    if {"num_replicas", "autoscaling_config"} & set(own):  # the operator's choice replaces ours whole
        options = {
            key: value for key, value in options.items() if key not in ("num_replicas", "autoscaling_config")
        }
    return {**options, **own, "ray_actor_options": actor_options}


def check_placement(settings: Settings, cluster: dict[str, float]) -> None:
    """Raise PlacementError naming what the replicas ask for (per replica x replicas) and
    what the cluster has, for every resource that does not fit. Autoscaled deployments count
    their least replicas. (Per-node limits such as max_replicas_per_node are Ray's to check.)"""
    asked: dict[str, list[str]] = {}
    needed: dict[str, float] = {}
    for name in DEPLOYMENTS:
        options = deployment_options(settings, name)
        autoscaling = options.get("autoscaling_config") or {}
        replicas = options.get("num_replicas", autoscaling.get("min_replicas", 1))
        actor = options["ray_actor_options"]
        wants = {
            "CPU": actor.get("num_cpus", 1),
            "GPU": actor.get("num_gpus", 0),
            **actor.get("resources", {}),
        }
        for resource, amount in wants.items():
            if amount:
                needed[resource] = needed.get(resource, 0) + amount * replicas
                asked.setdefault(resource, []).append(f"{name} {amount:g} x {replicas}")
    short = [resource for resource, amount in needed.items() if amount > cluster.get(resource, 0) + 1e-9]
    if short:
        example = (
            """ (e.g. '{"FrontDoor": {"ray_actor_options": {"num_cpus": 0.5}}}')""" if "CPU" in short else ""
        )
        raise PlacementError(
            "; ".join(
                f"the replicas ask for {needed[r]:g} {r} ({' + '.join(asked[r])}) but the cluster has "
                f"{cluster.get(r, 0):g}"
                for r in short
            )
            + ": lower the replica counts, ask less of a replica in --ray-deployment-options "
            f"(ray_deployment_options= under serve run){example}, or add nodes that have "
            + " and ".join(short)
        )


def _replicas(least: int, most: int, target: int | None) -> dict[str, Any]:
    """A fixed count, or autoscaling by requests in flight (`target` per replica; None: Ray's)."""
    if most <= least:
        return {"num_replicas": least}
    config: dict[str, Any] = {"min_replicas": least, "initial_replicas": least, "max_replicas": most}
    if target is not None:
        config["target_ongoing_requests"] = target
    return {"autoscaling_config": config}
