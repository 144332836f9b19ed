"""The model a request names, as vLLM reads it on the routes where a request may leave it out
(legacy completions, the render server's routes): checked against the served names, else
the first served name."""

from __future__ import annotations

from ...service import Service


def check_model(service: Service, model: str | None) -> None:
    """vLLM's _check_model: a request may leave the model out; one it names must be served."""
    if model is not None:
        service.check_request(model, 1)


def served_model(service: Service, model: str | None) -> str:
    """The model a request names, else the first served name (as vLLM's model_name())."""
    return model if model is not None else service.settings.served_model_name[0]
