"""The front door's two halves that live in other replicas: preprocessing (a call to a
decode replica) and the engine (a stream from an engine replica), shaped as the Service's
own parts, so app/mmprep/api's chat handler drives a request on Ray as it does in one process."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator

from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator

from ..core.errors import ServiceError
from ..interface.engine import EngineOutput
from ..preprocess import Timing
from .handoff import RAY_UNAVAILABLE, PreparedInStore, ReplicaUnavailable

log = logging.getLogger("mmprep.ray")

# A call whose replica died before answering is sent again (nothing has reached the
# client; decoding has no side effects, and the engine had produced nothing): Ray's router
# drops the dead replica and picks a live one, or waits for Serve to start one.
# Between attempts, a pause that grows: a replica whose node just went is "unavailable"
# for a moment before Ray declares it dead, and the router may pick it again until then.
DECODE_ATTEMPTS = 3
ENGINE_ATTEMPTS = 3
RETRY_PAUSE = 0.5


class RayPreprocessing:
    """The Service's preprocessing, done by the decode deployment."""

    def __init__(self, decode: DeploymentHandle):
        self.preprocessor = DecodeReplicas(decode)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


class DecodeReplicas:
    def __init__(self, decode: DeploymentHandle):
        self._decode = decode

    async def prepare(
        self, request, request_id: str, cancel: threading.Event
    ) -> tuple[PreparedInStore, Timing]:
        """As Preprocessor.prepare, on a decode replica; the tensors stay in the object store.
        `cancel` is not needed here: cancelling this coroutine cancels the replica's call."""
        for attempt in range(1, DECODE_ATTEMPTS + 1):
            response = self._decode.prepare.remote(request, request_id)
            try:
                result = await response
            except asyncio.CancelledError:
                response.cancel()
                raise
            except RAY_UNAVAILABLE as error:
                if attempt == DECODE_ATTEMPTS:
                    raise ReplicaUnavailable("decode", error) from error
                log.warning("decode replica lost (%s); sending the request again", type(error).__name__)
                await asyncio.sleep(RETRY_PAUSE * attempt)
                continue
            if isinstance(result, ServiceError):
                raise result
            return result
        raise AssertionError("unreachable")


class RayEngine:
    """An Engine whose generation runs on an engine replica. A replica lost for good is a
    503 (JSON before the first output; after it, the stream's error event)."""

    def __init__(self, engine: DeploymentHandle):
        self._engine = engine
        self.accepted_fields: set[str] | None = None
        self.gives_logprobs: bool | None = None
        self._started = False

    async def start(self) -> None:
        fields, self.gives_logprobs = await self._engine.facts.remote()  # also waits for an engine replica
        self.accepted_fields = None if fields is None else set(fields)
        self._started = True

    async def stop(self) -> None:
        pass

    def ready(self) -> bool:
        return self._started

    async def generate(self, request: PreparedInStore) -> AsyncGenerator[EngineOutput, None]:
        """As the remote workers do: a replica lost before the first output gets the request
        again (the PreparedRequest is still in the store); after it, the stream fails."""
        for attempt in range(1, ENGINE_ATTEMPTS + 1):
            stream = self._engine.options(stream=True).generate.remote(request)
            assert isinstance(stream, DeploymentResponseGenerator)  # what a stream=True handle returns
            started = False
            try:
                async for batch in stream:
                    if isinstance(batch, ServiceError):
                        raise batch
                    started = True
                    for output in batch:
                        yield output
                return
            except RAY_UNAVAILABLE as error:
                if started or attempt == ENGINE_ATTEMPTS:
                    raise ReplicaUnavailable("engine", error) from error
                log.warning("engine replica lost (%s); sending the request again", type(error).__name__)
                await asyncio.sleep(RETRY_PAUSE * attempt)
            finally:
                stream.cancel()  # a no-op once it has ended; else the replica stops generating
