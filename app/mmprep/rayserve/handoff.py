"""What crosses Ray between the application's replicas, and Ray's failures as the client's
errors.

A decode replica leaves the PreparedRequest in Ray's object store and answers with a
`PreparedInStore`; the front door hands that to an engine replica, which takes the
PreparedRequest out of the store itself. So the tensors go from decoding to the engine
without passing through the front door (on one node, numpy maps them from shared memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import ray
from ray import exceptions as ray_errors
from ray.serve import exceptions as serve_errors

from ..core.errors import ServiceError
from ..interface.prepared import SamplingParams, TokenPrompt

# A replica (or its node, or the object it left in the store) is gone, or none can take the
# request now: the deployment's state, not the request's fault. Ray restarts the replica.
RAY_UNAVAILABLE = (
    ray_errors.RayActorError,  # ActorDiedError, ActorUnavailableError
    ray_errors.ObjectLostError,  # OwnerDiedError: the decode replica that held the tensors died
    ray_errors.NodeDiedError,
    ray_errors.WorkerCrashedError,
    serve_errors.BackPressureError,
    serve_errors.DeploymentUnavailableError,
)


@dataclass(frozen=True)
class PreparedInStore:
    """A PreparedRequest in Ray's object store, as the front door holds it."""

    request_id: str
    media: tuple[str, ...]  # each item's kind: the chat handler logs how many there are
    ref: ray.ObjectRef  # nested, so Ray passes the reference on and the engine fetches it
    # What the front door's own derendering reads of the request (no tensors): the stop
    # conditions and, with --model, the prompt (the reasoning parser reads how it ends).
    sampling: SamplingParams
    prompt: TokenPrompt | None = None


class ReplicaUnavailable(ServiceError):
    status = 503
    code = "replica_unavailable"
    headers = {"Retry-After": "1"}

    def __init__(self, role: str, error: BaseException):
        super().__init__(
            f"the {role} replica working on this request is gone or busy ({type(error).__name__}); "
            "Ray is replacing it: retry shortly"
        )


def portable(error: ServiceError) -> ServiceError:
    """`error` as a plain ServiceError, which Ray can unpickle on the other side (a subclass
    whose __init__ takes other arguments, like EngineHTTPError, could not be rebuilt)."""
    copy = ServiceError(error.message, error.code, error.param, error.status)
    copy.headers = error.headers
    return copy
