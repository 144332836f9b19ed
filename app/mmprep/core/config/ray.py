"""runtime=ray (app/mmprep/rayserve): replicas and Ray Serve's options per deployment."""

from __future__ import annotations

from pydantic import Field, field_validator

from .group import SettingsGroup

# The names --ray-deployment-options takes, the Ray application's deployments (app/mmprep/
# rayserve/application.py's DEPLOYMENTS, which a test holds to these).
RAY_DEPLOYMENTS = ("FrontDoor", "Decode", "Engine")


class RaySettings(SettingsGroup):
    """runtime=ray (app/mmprep/rayserve)."""

    ray_front_door_replicas: int = Field(1, ge=1, description="runtime=ray: front door (HTTP) replicas")
    ray_decode_replicas: int = Field(
        1, ge=1, description="runtime=ray: decode replicas (each fetches and decodes with --decode-workers)"
    )
    ray_max_decode_replicas: int = Field(
        0,
        ge=0,
        description="runtime=ray: above --ray-decode-replicas, autoscale decode replicas up to this many, "
        "aiming at --decode-workers requests in flight per replica (0: a fixed count)",
    )
    ray_engine_replicas: int = Field(1, ge=1, description="runtime=ray: engine replicas")
    ray_max_engine_replicas: int = Field(
        0,
        ge=0,
        description="runtime=ray: above --ray-engine-replicas, autoscale engine replicas up to this many, "
        "by requests in flight (0: a fixed count)",
    )
    ray_deployment_options: dict[str, dict] = Field(
        {},
        description="runtime=ray: Ray Serve options per deployment (FrontDoor, Decode, Engine), as in Ray's "
        """config file and laid over the above, e.g. '{"Engine": {"ray_actor_options": {"num_gpus": 1}}}'""",
    )

    @field_validator("ray_deployment_options")
    @classmethod
    def _deployments_known(cls, options: dict[str, dict]) -> dict[str, dict]:
        unknown = sorted(set(options) - set(RAY_DEPLOYMENTS))
        if unknown:
            raise ValueError(
                f"no deployment is named {', '.join(unknown)}: they are {', '.join(RAY_DEPLOYMENTS)}"
            )
        return options
