"""What a route is handed by FastAPI: the Service the app was made around."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ...service import Service


async def get_service(request: Request) -> Service:
    # async, though it awaits nothing: FastAPI runs a plain `def` dependency in its thread
    # pool, a thread hop for every request.
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]
