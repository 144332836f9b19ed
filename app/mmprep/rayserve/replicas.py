"""The application's three deployments: the front door (app/mmprep/api's FastAPI app around a
Service whose preprocessing and engine are the other two), decode replicas (fetch and
decode, with their own pool and cache) and engine replicas (the Engine the settings name)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

import ray
from ray import serve
from ray.serve.handle import DeploymentHandle

from ..api.app import create_app
from ..core.config import Settings
from ..core.disconnect import close_shielded
from ..core.errors import ServiceError
from ..core.logging import request_id_var
from ..core.metrics import Metrics
from ..engines.loading import build_engine
from ..interface.engine import Engine, EngineOutput
from ..preprocess import LocalPreprocessing, Preprocessing, Timing
from ..service import Service, load_resources
from .front import RayEngine, RayPreprocessing
from .handoff import RAY_UNAVAILABLE, PreparedInStore, ReplicaUnavailable, portable

if TYPE_CHECKING:
    from ..preprocess import ChatInput

# An engine replica sends its outputs in batches: what the engine produced within this long
# of a batch's first output. Ray streams each item as an object of its own (about 0.2 ms
# each here), and an echo answer is hundreds of one-token outputs.
BATCH_SECONDS = 0.002


@serve.ingress()
class FrontDoor:
    def __init__(self, settings: Settings, decode: DeploymentHandle, engine: DeploymentHandle):
        # The Service hands its engine what its preprocessing made: here RayPreprocessing's
        # PreparedInStore, which RayEngine takes in place of a PreparedRequest.
        self._service = Service(
            settings, cast(Engine, RayEngine(engine)), cast(Preprocessing, RayPreprocessing(decode))
        )

    def __serve_build_asgi_app__(self):
        return create_app(service=self._service)


class DecodeReplica:
    async def __init__(self, settings: Settings):  # type: ignore[misc]  # Ray Serve awaits an async constructor
        self._preprocessing = LocalPreprocessing(load_resources(settings), Metrics())
        await self._preprocessing.start()

    async def prepare(
        self, request: ChatInput, request_id: str
    ) -> tuple[PreparedInStore, Timing] | ServiceError:
        """The request's PreparedRequest put in the object store; a refusal as a value (a 400 is
        an answer, not a failure of this replica for Ray to log). If the front door cancels
        the call (its client left), the CancelledError stops the fetches and decodes."""
        request_id_var.set(request_id)
        preprocessor = self._preprocessing.preprocessor
        assert preprocessor is not None  # made by start(), which __init__ awaited
        try:
            prepared, timing = await preprocessor.prepare(request, request_id, threading.Event())
        except ServiceError as error:
            return portable(error)
        kinds = tuple(item.kind for item in prepared.media)
        return PreparedInStore(
            prepared.request_id, kinds, ray.put(prepared), prepared.sampling, prepared.prompt
        ), timing

    async def __del__(self):
        await self._preprocessing.stop()


class EngineReplica:
    async def __init__(self, settings: Settings):  # type: ignore[misc]  # Ray Serve awaits an async constructor
        self._engine = build_engine(load_resources(settings))
        await self._engine.start()

    def facts(self) -> tuple[list[str] | None, bool | None]:
        """The engine's accepted_fields and gives_logprobs, which the front door reads."""
        fields = self._engine.accepted_fields
        return (None if fields is None else sorted(fields)), self._engine.gives_logprobs

    async def generate(self, stored: PreparedInStore) -> AsyncIterator[list[EngineOutput] | ServiceError]:
        """The engine's outputs in batches; a ServiceError, as the last item, ends them."""
        try:
            prepared = await stored.ref  # the PreparedRequest, as the decode replica made it
        except RAY_UNAVAILABLE as error:
            yield portable(ReplicaUnavailable("decode", error))
            return
        outputs = self._engine.generate(prepared)
        try:
            async for batch in batched(outputs):
                yield batch
        except ServiceError as error:
            yield portable(error)
        finally:
            await close_shielded(outputs)

    async def __del__(self):
        await self._engine.stop()


async def batched(outputs: AsyncIterator, seconds: float = BATCH_SECONDS) -> AsyncIterator[list]:
    """`outputs` in lists: each list holds an output and those that followed it within
    `seconds`. Waiting for the next output goes on across batches, in one task."""
    loop = asyncio.get_running_loop()
    pending = asyncio.ensure_future(anext(outputs, None))
    try:
        while (first := await pending) is not None:
            batch, deadline = [first], loop.time() + seconds
            while True:
                pending = asyncio.ensure_future(anext(outputs, None))
                done, _ = await asyncio.wait({pending}, timeout=max(0.0, deadline - loop.time()))
                if not done or pending.exception() is not None or pending.result() is None:
                    break  # an error is raised by the next `await pending`, after this batch
                batch.append(pending.result())
            yield batch
    finally:
        if not pending.done():  # the consumer left: stop the engine's step before it is closed
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
