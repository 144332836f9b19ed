"""A real Ray cluster on this machine with mmprep's Ray application on it, for the tests
and the benchmark: `ray.cluster_utils.Cluster` nodes (each its own raylet and object
store), Ray Serve's HTTP proxy on the head node only, and a URL to send requests to."""

from __future__ import annotations

import logging
import time
from typing import Self

import ray
from ray import serve
from ray.cluster_utils import Cluster
from ray.serve.schema import ReplicaState

from mmprep.core.config import Settings
from mmprep.rayserve.application import build_app
from mmprep.rayserve.run import APP_NAME
from tests.support.servers import free_port


class RayCluster:
    """`nodes` nodes of `cpus` CPUs each; the head also has the resource "head", so a
    deployment can be kept off the nodes a test removes."""

    def __init__(self, nodes: int = 2, cpus: int = 2):
        self._cpus = cpus
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": cpus, "resources": {"head": 1}, "include_dashboard": False},
        )
        self.workers = [self.add_node() for _ in range(nodes - 1)]
        ray.init(address=self.cluster.address, logging_level=logging.WARNING, log_to_driver=False)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # One proxy: on one machine, every node's proxy would bind the same port.
        serve.start(http_options={"host": "127.0.0.1", "port": self.port}, proxy_location="HeadOnly")

    def add_node(self):
        return self.cluster.add_node(num_cpus=self._cpus)

    def deploy(self, settings: Settings) -> Self:
        """mmprep's application with these settings, replacing any before; ready when this returns."""
        serve.run(build_app(settings), name=APP_NAME, route_prefix="/")
        return self

    def replicas(self, deployment: str) -> list[str]:
        """The names of the deployment's live replica actors."""
        prefix = f"SERVE_REPLICA::{APP_NAME}#{deployment}#"
        names = [actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)]
        return sorted(name for name in names if name.startswith(prefix))

    def node_of(self, replica: str) -> str:
        """The id of the node a live replica runs on (from the GCS's actor table: the state
        API needs the dashboard, which these clusters go without)."""
        from ray._private import state

        (node,) = [
            actor["Address"]["NodeID"]
            for actor in state.actors().values()
            if actor["Name"] == replica and actor["State"] == "ALIVE"
        ]
        return node

    def kill_replica(self, name: str) -> None:
        """As a crash: the actor's process is killed, and Serve's controller notices."""
        ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)

    def wait_running(
        self, deployment: str, replicas: int, replacing: tuple[str, ...] = (), timeout: float = 60
    ) -> None:
        """Until the deployment has `replicas` running and none of the `replacing` ones is among them."""
        deadline = time.monotonic() + timeout
        while True:
            status = serve.status().applications[APP_NAME].deployments[deployment]
            names = self.replicas(deployment)
            running = (
                status.status == "HEALTHY" and status.replica_states.get(ReplicaState.RUNNING, 0) == replicas
            )
            if running and len(names) == replicas and not set(replacing) & set(names):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{deployment} did not get back to {replicas} running replicas: {status}")
            time.sleep(0.2)

    def close(self) -> None:
        serve.shutdown()
        ray.shutdown()
        self.cluster.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
