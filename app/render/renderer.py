"""`Renderer`: a chat request to the prompt's token ids, as transformers' processor gives
them for the same messages and frames (`processor(text=apply_chat_template(...),
videos=..., do_sample_frames=False)["input_ids"]`).

1. The messages as the template takes them (content_format.py: parts or joined text), the
   request's tools, chat_template_kwargs, add_generation_prompt and continue_final_message
   as vLLM reads them; rendered in transformers' sandbox (template.py).
2. The text tokenized once, each image or video still one pad token.
3. Each pad replaced by its item's tokens, in prompt order (placeholders.py). Special tokens
   are atomic, so this equals tokenizing the expanded text, without tokenizing thousands of
   pads (the live test checks it against transformers).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jinja2

from ..core.errors import ServiceError
from ..engines.prepared import MediaItem, Placeholder, TokenPrompt
from ..model import ModelFolder
from .content_format import detect_content_format
from .placeholders import item_tokens
from .template import TemplateInputError, compile_template

MediaKind = Literal["image", "video"]  # as MediaItem.kind

# chat_template_kwargs that would replace what mmprep itself gives the template (vLLM
# refuses chat_template and tokenize there too); the rest reach the template if it reads them.
_REFUSED_KWARGS = ("chat_template", "tokenize")
_OWN_INPUTS = frozenset({"messages", "tools", "documents", "add_generation_prompt", "continue_final_message"})


class Renderer:
    """One per model folder (the template compiled once, the tokenizer shared)."""

    def __init__(self, folder: ModelFolder, max_model_len: int | None = None):
        self.folder = folder
        self.max_model_len = max_model_len  # None: no limit (vLLM's max_model_len, --max-model-len)
        self.template = compile_template(folder.chat_template)
        self.content_format = detect_content_format(self.template.ast)
        # vLLM renders a request with tools with the tokenizer's template (the same one in
        # the Qwen-VL folders)
        self.tools_template = compile_template(folder.tools_chat_template)
        self.tools_content_format = detect_content_format(self.tools_template.ast)
        self._pad_kinds: dict[int, MediaKind] = {
            folder.image_token_id: "image",
            folder.video_token_id: "video",
        }

    # -- step 1: the text ---------------------------------------------------------------

    def render_text(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: Any = None,
        documents: Any = None,
        add_generation_prompt: Any = True,
        continue_final_message: Any = False,
        chat_template_kwargs: Any = None,
    ) -> str:
        """The rendered template. `messages` are OpenAI-shaped, with media parts as
        {"type": "image" | "video", ...} (PreparedRequest.messages). A ServiceError (400)
        names the field for anything the request or the template refuses."""
        add_generation_prompt = _flag(add_generation_prompt, "add_generation_prompt")
        continue_final_message = _flag(continue_final_message, "continue_final_message")
        if add_generation_prompt and continue_final_message:
            raise ServiceError(
                "add_generation_prompt and continue_final_message cannot both be true (the first starts "
                "a new assistant turn, the second continues the last message); "
                "set add_generation_prompt to false",
                "invalid_request",
                "continue_final_message",
            )
        tools = _tool_list(tools)
        template, content_format = (
            (self.template, self.content_format)
            if tools is None
            else (self.tools_template, self.tools_content_format)
        )
        kwargs = self._template_kwargs(template, chat_template_kwargs)
        try:
            return template.render(
                [
                    self._message(message, content_format, f"messages[{i}]")
                    for i, message in enumerate(messages)
                ],
                tools=tools,
                documents=_document_list(documents),
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                special_tokens=self.folder.template_tokens,
                **kwargs,
            )
        except TemplateInputError as error:
            raise ServiceError(str(error), "invalid_request", "continue_final_message") from None
        except jinja2.exceptions.TemplateError as error:
            raise ServiceError(
                f"the model's chat template refused the request: {error}", "chat_template_error", "messages"
            ) from None
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as error:
            raise ServiceError(
                f"the model's chat template failed on the request: {type(error).__name__}: {error}",
                "chat_template_error",
                "messages",
            ) from None

    def _template_kwargs(self, template, given: Any) -> dict[str, Any]:
        if given is None:
            return {}
        if not isinstance(given, dict):
            raise ServiceError(
                "chat_template_kwargs must be an object", "invalid_request", "chat_template_kwargs"
            )
        for name in _REFUSED_KWARGS:
            if name in given:
                raise ServiceError(
                    f"chat_template_kwargs may not set {name!r}",
                    "invalid_request",
                    f"chat_template_kwargs.{name}",
                )
        # As vLLM: only the variables the template reads (enable_thinking, add_vision_id, ...);
        # never one of the inputs mmprep passes itself.
        return {k: v for k, v in given.items() if k in template.variables and k not in _OWN_INPUTS}

    def _message(self, message: dict[str, Any], content_format: str, where: str) -> dict[str, Any]:
        """A message as vLLM hands it to the template: media parts as {"type": kind}, text parts
        as {"type": "text", "text": ...} ("openai" templates) or everything joined ("string"),
        and a tool call's JSON arguments parsed (templates write them with tojson)."""
        message = dict(message)
        content = message.get("content")
        if isinstance(content, list):
            parts = [_template_part(part) for part in content]
            message["content"] = parts if content_format == "openai" else self._joined(parts)
        if message.get("role") == "assistant" and message.get("tool_calls") is not None:
            _check_tool_calls(message["tool_calls"], f"{where}.tool_calls")
            message["tool_calls"] = [_parsed_arguments(call) for call in message["tool_calls"]]
        return message

    def _joined(self, parts: list[dict[str, Any]]) -> str:
        """vLLM's "string" form: the model's placeholder for each media item, then the text
        parts, one per line."""
        placeholders = {
            "image": "<|vision_start|><|image_pad|><|vision_end|>",
            "video": "<|vision_start|><|video_pad|><|vision_end|>",
        }
        media = [placeholders[part["type"]] for part in parts if part["type"] != "text"]
        texts = [part["text"] for part in parts if part["type"] == "text"]
        return "\n".join(media + texts)

    # -- steps 2 and 3: the token ids ---------------------------------------------------

    def tokens(self, text: str, media: list[MediaItem]) -> TokenPrompt:
        """`text` tokenized, each image and video pad expanded to its item's tokens. `media`
        in prompt order, each processed (MediaItem.processed)."""
        ids = self.folder.encode(text)
        _check_tokens(len(ids), self.max_model_len)
        pads = sorted((at, kind) for pad, kind in self._pad_kinds.items() for at in _positions(ids, pad))
        _check_counts(pads, media)
        if not pads:
            return TokenPrompt(tuple(ids), (), text)
        out: list[int] = []
        placeholders = []
        start = 0
        for index, ((at, kind), item) in enumerate(zip(pads, media, strict=True)):
            out += ids[start:at]
            tokens = item_tokens(self.folder, item)
            placeholders.append(Placeholder(kind, index, len(out), len(tokens)))
            out += tokens
            start = at + 1
        out += ids[start:]
        _check_expanded(len(out), self.max_model_len)
        return TokenPrompt(tuple(out), tuple(placeholders), text)

    def render(self, messages: list[dict[str, Any]], media: list[MediaItem], **options: Any) -> TokenPrompt:
        """render_text, then tokens: the prompt as a token-in engine takes it."""
        return self.tokens(self.render_text(messages, **options), media)


def _check_tokens(count: int, limit: int | None) -> None:
    """vLLM's first check (renderers/params.py _token_len_check), on the prompt with one pad
    per item: its tokenizer stops at limit + 1 tokens, hence "at least"."""
    if limit is None or count <= limit:
        return
    count = min(count, limit + 1)
    qualifier = "at least " if count == limit + 1 else ""
    raise ServiceError(
        f"This model's maximum context length is {limit} tokens. However, your prompt contains "
        f"{qualifier}{count} input tokens, which exceeds this limit even without any output tokens. "
        "Please reduce the length of the input prompt.",
        "context_length_exceeded",
        "messages",
    )


def _check_expanded(count: int, limit: int | None) -> None:
    """vLLM's second check (entrypoints/serve/utils/api_utils.py get_max_tokens), on the prompt
    with each image and video expanded to its tokens."""
    if limit is not None and count > limit:
        raise ServiceError(
            f"Input length ({count}) exceeds model's maximum context length ({limit}).",
            "context_length_exceeded",
            "messages",
        )


def _positions(ids: list[int], token: int) -> list[int]:
    """Where `token` occurs in `ids` (list.index runs in C: a 2k-token prompt's scan costs
    microseconds, not the tens a Python loop over every id would)."""
    found, at = [], -1
    for _ in range(ids.count(token)):
        at = ids.index(token, at + 1)
        found.append(at)
    return found


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ServiceError(f"{name} must be true or false", "invalid_request", name)
    return value


def _tool_list(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise ServiceError("tools must be a list of objects", "invalid_request", "tools")
    return tools


def _document_list(documents: Any) -> list[dict[str, Any]] | None:
    if documents is None:
        return None
    if not isinstance(documents, list) or not all(isinstance(document, dict) for document in documents):
        raise ServiceError("documents must be a list of objects", "invalid_request", "documents")
    return documents


def _template_part(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") in ("image", "video"):
        return {"type": part["type"]}
    return part


def _check_tool_calls(calls: Any, where: str) -> None:
    """An assistant turn's calls, shaped as OpenAI's (what the template will read), or a 400
    naming the first field that is not (vLLM checks them with its pydantic models)."""
    if not isinstance(calls, list):
        raise ServiceError(f"{where} must be a list of tool calls", "invalid_request", where)
    for j, call in enumerate(calls):
        here = f"{where}[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise ServiceError(
                f"{here} must be an object with a function", "invalid_request", f"{here}.function"
            )
        for key in ("name", "arguments"):
            if not isinstance(function.get(key), str):
                raise ServiceError(
                    f"{here}.function.{key} must be a string", "invalid_request", f"{here}.function.{key}"
                )


def _parsed_arguments(call: Any) -> Any:
    """vLLM parses a tool call's `arguments` JSON string to an object before rendering."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    arguments = call["function"].get("arguments")
    if not isinstance(arguments, str):
        return call
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return call  # left as the string, which templates write as it is
    return {**call, "function": {**call["function"], "arguments": parsed}}


def _check_counts(pads: list[tuple[int, MediaKind]], media: list[MediaItem]) -> None:
    """Each media item needs its pad in the rendered prompt, in the same order."""
    in_prompt = [kind for _, kind in pads]
    given = [item.kind for item in media]
    if in_prompt == given:
        return
    counts = {kind: (in_prompt.count(kind), given.count(kind)) for kind in ("image", "video")}
    detail = ", ".join(
        f"{kind}s: {found} in the prompt, {sent} sent" for kind, (found, sent) in counts.items()
    )
    raise ServiceError(
        f"the rendered prompt's image and video placeholders do not match the request's media ({detail}); "
        "the chat template may drop media parts of some roles, or a text part holds a placeholder token",
        "placeholder_mismatch",
        "messages",
    )
