"""The front door's one mapping of errors to HTTP answers. Every room below raises its own
domain errors; the client-facing ones are core.errors.ServiceErrors (status, code, param,
message), which the libraries' errors (MediaError, ProcessorError) become where the part they
are about is known (app/mmprep/preprocess). Anything else is a bug: a 500, its traceback logged."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi.responses import JSONResponse, Response

from ...core.errors import ServiceError, as_service_error
from ...service import Service

log = logging.getLogger("mmprep.api")


def refuse(
    service: Service, error: BaseException, shape: Callable[[ServiceError], dict] = ServiceError.body
) -> JSONResponse:
    """The error answer for `error` (OpenAI's shape, or the client API's `shape`), counted in
    /metrics and logged."""
    failure = as_service_error(error)
    service.record(failure.status, failure.code, failure.param)
    return JSONResponse(shape(failure), status_code=failure.status, headers=failure.headers)


def client_gone(service: Service) -> Response:
    log.info("client went away; work for it stopped")
    service.record(499)
    return Response(status_code=499)
