"""kimi_k2 (Kimi K2, vLLM's KimiK2Parser): glm45's rules, the tool-call section's opening
ending the reasoning when calls are parsed."""

from __future__ import annotations

from . import REGISTRY
from .glm45 import Glm45ReasoningParser


@REGISTRY.register
class KimiK2ReasoningParser(Glm45ReasoningParser):
    name = "kimi_k2"
