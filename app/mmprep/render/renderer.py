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
4. Where an item's tokens begin or end in text the tokenizer joins with the text beside it
   (Gemma 3's "\n\n" around an image), the family's token merges, as vLLM applies them
   (Family.token_merges); a placeholder then starts at the joined token, as vLLM's does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import jinja2
import numpy as np

from mmprep import families
from mmprep.processors import Processor

from ..core.errors import ServiceError
from ..interface.prepared import TOKEN_ID, MediaItem, Placeholder, TokenPrompt
from ..modalities import MODALITIES
from ..model import ModelFolder, ModelFolderError
from .content_format import detect_content_format
from .options import TemplateOptions
from .placeholders import item_tokens
from .template import CompiledTemplate, TemplateInputError, compile_template

log = logging.getLogger("mmprep.render")


# The chat_template_kwargs mmprep gives the template itself: the rest reach it if it reads them.
_OWN_INPUTS = frozenset({"messages", "tools", "documents", "add_generation_prompt", "continue_final_message"})
# Neither reaches the template: chat_template is the template itself (chosen per request), and
# tokenize changes nothing in the ids (vLLM passes it to apply_chat_template, which tokenizes
# the same text as vLLM would after it).
_NOT_PASSED = _OWN_INPUTS | {"chat_template", "tokenize"}
# vLLM's words (OnlineRenderer.validate_chat_template), so a client sees the same refusal.
UNTRUSTED_TEMPLATE = (
    "Chat template is passed with request, but --trust-request-chat-template is not set. "
    "Refused request with untrusted chat template."
)


class Renderer:
    """One per model folder (the template compiled once, the tokenizer shared).
    `trust_request_chat_template`: a request's own `chat_template` is used, as vLLM's flag of
    that name makes it; else such a request is refused."""

    def __init__(
        self,
        folder: ModelFolder,
        max_model_len: int | None = None,
        trust_request_chat_template: bool = False,
        chat_template: str | None = None,
        content_format: str = "auto",
    ):
        self.folder = folder
        self.family = families.get(folder.family)
        self.max_model_len = max_model_len  # None: no limit (vLLM's max_model_len, --max-model-len)
        self.trust_request_chat_template = trust_request_chat_template
        # vllm serve's --chat-template-content-format: "auto" detects each template's own
        self.forced_format = None if content_format == "auto" else content_format
        if chat_template is not None:  # --chat-template: for every request, those with tools too
            text = server_template(chat_template)
            self.template = self.tools_template = _compiled(text, "--chat-template")
        else:
            self.template = _folder_template(folder, folder.chat_template, folder.chat_template_source)
            # vLLM renders a request with tools with the tokenizer's template (the same one in
            # the Qwen-VL folders)
            self.tools_template = _folder_template(
                folder, folder.tools_chat_template, folder.tools_chat_template_source
            )
        self.content_format = self._format_of(self.template)
        self.tools_content_format = self._format_of(self.tools_template)
        self._pad_kinds = {folder.pad_token_id(kind): kind for kind in MODALITIES if self.family.takes(kind)}
        self._merges = self.family.token_merges(folder.encode)

    # -- step 1: the text ---------------------------------------------------------------

    def render_text(self, messages: list[dict[str, Any]], options: TemplateOptions | None = None) -> str:
        """The rendered template. `messages` are OpenAI-shaped, with media parts as
        {"type": "image" | "video", ...} (PreparedRequest.messages), their tool calls shaped as
        OpenAI's (app/mmprep/api checks them); `options` typed (app/mmprep/api checks them). A ServiceError
        (400) names the field for anything this deployment or the template refuses."""
        options = options or TemplateOptions()
        tools = _tool_list(options.tools)
        chat_template_kwargs = _effective_kwargs(options.chat_template_kwargs, options.reasoning_effort)
        # vLLM merges the request's tools and documents under chat_template_kwargs: theirs win
        if chat_template_kwargs.get("tools") is not None:
            tools = chat_template_kwargs["tools"]  # handed to the template as they came, as vLLM does
        documents = options.documents
        if documents is None:
            documents = chat_template_kwargs.get("documents")
        template, content_format = self._template_for(tools, options.chat_template, chat_template_kwargs)
        kwargs = self._template_kwargs(template, chat_template_kwargs)
        try:
            chat = [
                self._message(message, content_format, f"messages[{i}]") for i, message in enumerate(messages)
            ]
            return template.render(
                _developer_as_system(chat, template.source),
                tools=tools,
                documents=documents,
                add_generation_prompt=options.add_generation_prompt,
                continue_final_message=options.continue_final_message,
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

    def _template_for(
        self, tools: list[dict[str, Any]] | None, chat_template: str | None, kwargs: dict[str, Any]
    ) -> tuple[CompiledTemplate, str]:
        """The template this request renders with, and its content format: the request's own
        where trusted (top-level `chat_template`, else chat_template_kwargs' one, as vLLM
        merges them), else the folder's (the tokenizer's for a request with tools)."""
        given, param = chat_template, "chat_template"
        if given is None and kwargs.get("chat_template") is not None:
            given, param = kwargs["chat_template"], "chat_template_kwargs.chat_template"
        if given is None:
            if tools is None:
                return self.template, self.content_format
            return self.tools_template, self.tools_content_format
        if not self.trust_request_chat_template:
            raise ServiceError(UNTRUSTED_TEMPLATE, "invalid_request", param)
        try:
            template = compile_template(given)
        except jinja2.exceptions.TemplateSyntaxError as error:
            raise ServiceError(
                f"{param} does not compile: line {error.lineno}: {error.message}", "invalid_request", param
            ) from None
        return template, self._format_of(template)

    def _format_of(self, template: CompiledTemplate) -> str:
        return self.forced_format or detect_content_format(template.ast)

    def _template_kwargs(self, template, given: dict[str, Any]) -> dict[str, Any]:
        # As vLLM: only the variables the template reads (enable_thinking, add_vision_id, ...).
        return {k: v for k, v in given.items() if k in template.variables and k not in _NOT_PASSED}

    def _message(self, message: dict[str, Any], content_format: str, where: str) -> dict[str, Any]:
        """A message as vLLM hands it to the template (renderers/chat_utils
        `parse_chat_message_content`): its content as parts, a string being one text part and
        none no parts; media parts as {"type": kind}, text parts as {"type": "text", "text": ...}
        ("openai" templates) or everything joined ("string"); a tool message's text parts
        joined into one string; a tool call's arguments parsed to an object (templates write
        them with tojson). Parts, not a string, matter where a template tests the content: an
        assistant turn of "" with tool calls is `[{"type": "text", "text": ""}]` to vLLM, which
        the Qwen templates find not empty."""
        message = _fields_vllm_keeps(message)
        parts = [_template_part(part) for part in _as_parts(message.get("content"))]
        if message.get("role") == "tool" and all(part["type"] == "text" for part in parts):
            # as vLLM joins them: most templates write a tool's result only as a string
            message["content"] = "\n".join(part["text"] for part in parts)
        else:
            message["content"] = parts if content_format == "openai" else self._joined(parts)
        if message.get("role") == "assistant" and message.get("tool_calls") is not None:
            calls = message["tool_calls"]
            if calls:
                message["tool_calls"] = [
                    _parsed_arguments(call, f"{where}.tool_calls[{j}].function.arguments")
                    for j, call in enumerate(calls)
                ]
            else:  # vLLM drops an empty list, so the template takes its plain assistant path
                del message["tool_calls"]
        return message

    def _joined(self, parts: list[dict[str, Any]]) -> str:
        """vLLM's "string" form: the model's placeholder for each media item (its family's),
        then the text parts, one per line."""
        sides = self.family.sides
        media = [sides[part["type"]].placeholder for part in parts if part["type"] != "text"]
        texts = [part["text"] for part in parts if part["type"] == "text"]
        return "\n".join(media + texts)

    # -- steps 2 and 3: the token ids ---------------------------------------------------

    def tokens(self, text: str, media: list[MediaItem], processor: Processor | None = None) -> TokenPrompt:
        """`text` tokenized, each image and video pad expanded to its item's tokens. `media`
        in prompt order, each processed (MediaItem.processed) by `processor` (default: the
        folder's; a request's processor options make another). The ids stay one uint32 array
        from the tokenizer's buffer on: found, cut and joined by numpy."""
        ids = self.folder.encode_ids(text)
        check_prompt_length(len(ids), self.max_model_len)
        pads = sorted(
            (at, kind) for pad, kind in self._pad_kinds.items() for at in np.flatnonzero(ids == pad).tolist()
        )
        _check_counts(pads, media)
        if not pads:
            return TokenPrompt(ids, (), text)
        pieces: list[np.ndarray] = []
        placeholders = []
        start = length = 0
        for (at, kind), index in zip(pads, _item_order(pads, media), strict=True):
            pieces.append(ids[start:at])
            length += at - start
            tokens = item_tokens(self.folder, media[index], processor)
            placeholders.append(Placeholder(kind, index, length, len(tokens)))
            pieces.append(np.asarray(tokens, dtype=TOKEN_ID))
            length += len(tokens)
            start = at + 1
        pieces.append(ids[start:])
        out = np.concatenate(pieces)
        if self._merges:
            out, placeholders = _merged(out, placeholders, self._merges)
        _check_expanded(len(out), self.max_model_len)
        return TokenPrompt(out, tuple(placeholders), text)

    def render(
        self, messages: list[dict[str, Any]], media: list[MediaItem], options: TemplateOptions | None = None
    ) -> TokenPrompt:
        """render_text, then tokens: the prompt as a token-in engine takes it."""
        return self.tokens(self.render_text(messages, options), media)


def _merged(
    ids: np.ndarray, placeholders: list[Placeholder], merges: list[tuple[list[int], list[int]]]
) -> tuple[np.ndarray, list[Placeholder]]:
    """The family's token merges applied as vLLM's replace_token_matches applies them (each
    run replaced wherever it occurs, left to right, not overlapping, one run after another),
    and each placeholder moved to the token its first token became part of (its length is
    its item's tokens', as vLLM counts it)."""
    starts = np.arange(len(ids))  # each token's first position in `ids`
    for run, replacement in merges:
        ids, starts = _replaced(ids, starts, run, replacement)
    moved = [
        dataclasses.replace(placeholder, offset=int(np.searchsorted(starts, placeholder.offset, "right")) - 1)
        for placeholder in placeholders
    ]
    return ids, moved


def _replaced(
    ids: np.ndarray, starts: np.ndarray, run: list[int], replacement: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    found: list[int] = []
    done = 0
    for at in np.flatnonzero(ids == run[0]).tolist():  # a long prompt has few candidates
        if at >= done and ids[at : at + len(run)].tolist() == run:
            found.append(at)
            done = at + len(run)
    if not found:
        return ids, starts
    out: list[np.ndarray] = []
    out_starts: list[np.ndarray] = []
    done = 0
    for at in found:
        out += [ids[done:at], np.asarray(replacement, dtype=TOKEN_ID)]
        out_starts += [starts[done:at], np.full(len(replacement), starts[at])]
        done = at + len(run)
    return np.concatenate([*out, ids[done:]]), np.concatenate([*out_starts, starts[done:]])


def check_prompt_length(count: int, limit: int | None, param: str = "messages") -> None:
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
        param,
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


def server_template(given: str) -> str:
    """vllm serve --chat-template's value as vLLM 0.33 loads it (load_chat_template): a file's
    text where the value opens as a file; else the value itself if it holds `{`, `}` or a line
    break; else a ModelFolderError (a path that is not there; vLLM's built-in template names
    are not shipped with mmprep)."""
    try:
        with open(given, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        if any(char in given for char in "{}\n"):
            return given
        raise ModelFolderError(
            f"--chat-template {given!r} looks like a file's path, but it does not open: {error.strerror}"
        ) from None


def _compiled(text: str, source: str) -> CompiledTemplate:
    try:
        return compile_template(text)
    except jinja2.exceptions.TemplateSyntaxError as error:
        raise ModelFolderError(
            f"{source}: the chat template does not compile: line {error.lineno}: {error.message}"
        ) from None


def _folder_template(folder: ModelFolder, text: str, source: str) -> CompiledTemplate:
    """A folder's template compiled, or a ModelFolderError naming its file and line (the
    template's own line: for a template inside a JSON file, of the template text)."""
    try:
        return compile_template(text)
    except jinja2.exceptions.TemplateSyntaxError as error:
        raise ModelFolderError(
            f"{folder.path / source}: the chat template does not compile: line {error.lineno} of the "
            f"template: {error.message}"
        ) from None


def _effective_kwargs(given: dict[str, Any], reasoning_effort: Any) -> dict[str, Any]:
    """chat_template_kwargs as vLLM merges them (ChatCompletionRequest.build_chat_params, then
    ChatParams.with_defaults): a value of null or "auto" counts as not given, and the request's
    reasoning_effort reaches the template under that name, with enable_thinking (false for
    "none") unless the request's kwargs say."""
    kwargs = {key: value for key, value in given.items() if value is not None and value != "auto"}
    if reasoning_effort is not None:
        kwargs["reasoning_effort"] = reasoning_effort
        if "enable_thinking" not in given:
            kwargs["enable_thinking"] = reasoning_effort != "none"
    return kwargs


def _tool_list(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    return None if tools is None else [_as_vllm_dumps_it(tool) for tool in tools]


def _as_vllm_dumps_it(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as vLLM hands it to the template (ChatCompletionToolsParam's model_dump): the
    function's name, description and parameters, null where not given (templates write the
    tool with tojson, so a missing description is `"description": null`), strict and
    defer_loading only where set, nothing else."""
    function = tool["function"]
    dumped = {key: function.get(key) for key in ("name", "description", "parameters")}
    defer = tool.get("defer_loading")
    # the function's defer_loading, else the tool's (vLLM's _propagate_defer_loading)
    own = function.get("defer_loading")
    extras = {"strict": function.get("strict"), "defer_loading": defer if own is None else own}
    dumped |= {key: value for key, value in extras.items() if value is not None}
    as_dumped = {"type": tool.get("type", "function"), "function": dumped}
    if defer is not None:
        as_dumped["defer_loading"] = defer
    return as_dumped


def _fields_vllm_keeps(message: dict[str, Any]) -> dict[str, Any]:
    """The fields of a message that reach the template in vLLM, which builds each message anew
    (renderers/chat_utils `parse_chat_message_content`): role and content; name and task if
    strings; an assistant's tool_calls and its reasoning (under reasoning and reasoning_content,
    read from either); a tool's tool_call_id; a developer's tools. Others never reach it."""
    role = message.get("role")
    kept: dict[str, Any] = {"role": role, "content": message.get("content")}
    kept |= {key: message[key] for key in ("name", "task") if isinstance(message.get(key), str)}
    if role == "assistant":
        if message.get("tool_calls") is not None:
            kept["tool_calls"] = message["tool_calls"]
        reasoning = message.get("reasoning")
        if reasoning is None:
            reasoning = message.get("reasoning_content")  # vLLM's deprecated name, renamed
        if reasoning is not None:
            kept["reasoning"] = kept["reasoning_content"] = reasoning
    elif role == "tool" and "tool_call_id" in message:
        kept["tool_call_id"] = message["tool_call_id"]
    elif role == "developer":
        kept["tools"] = message.get("tools")
    return kept


def _developer_as_system(chat: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """vLLM's safe_apply_chat_template: for a template that never names the developer role,
    developer messages become system ones (their tools dropped); where that leaves a system
    message past the first place, or more than one, their texts are merged into one first
    system message (lines joined within a message, paragraphs between them)."""
    if all(message["role"] != "developer" for message in chat) or any(
        quoted in source for quoted in ('"developer"', "'developer'")
    ):
        return chat
    chat = [
        {**{k: v for k, v in message.items() if k != "tools"}, "role": "system"}
        if message["role"] == "developer"
        else message
        for message in chat
    ]
    if [i for i, message in enumerate(chat) if message["role"] == "system"] == [0]:
        return chat
    texts = [_system_text(message.get("content")) for message in chat if message["role"] == "system"]
    merged = {"role": "system", "content": "\n\n".join(text for text in texts if text)}
    return [merged, *(message for message in chat if message["role"] != "system")]


def _system_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            part["text"] if isinstance(part, dict) else part
            for part in content
            if isinstance(part, str) or (isinstance(part, dict) and "text" in part)
        )
    return content or ""


def _as_parts(content: str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """A message's content as parts, as vLLM reads it: a string is one text part, none is none."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content


def _template_part(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") in MODALITIES:
        return {"type": part["type"]}
    return part


def _parsed_arguments(call: dict[str, Any], where: str) -> dict[str, Any]:
    """The call with its `arguments` (a string: app/mmprep/api checks it) as the object vLLM parses it
    to before rendering (renderers/chat_utils `_postprocess_messages`): "" and "null" are {};
    so is text that is not a JSON object, which vLLM renders as {} with a warning rather than
    refusing, since the call is history: a 400 would fail every later turn of the conversation."""
    arguments = call["function"]["arguments"]
    try:
        parsed = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        log.warning(
            "%s is not valid JSON (%d chars): rendered as {}, as vLLM renders it", where, len(arguments)
        )
        parsed = {}
    if parsed is not None and not isinstance(parsed, dict):
        log.warning(
            "%s is JSON but not an object (%s): rendered as {}, as vLLM renders it",
            where,
            type(parsed).__name__,
        )
    if not isinstance(parsed, dict):
        parsed = {}
    return {**call, "function": {**call["function"], "arguments": parsed}}


def _item_order(pads: list[tuple[int, families.Kind]], media: list[MediaItem]) -> list[int]:
    """Each pad's item (its index in `media`): the k-th image pad is the k-th image, the
    k-th video pad the k-th video, as transformers' processor and vLLM pair them (a
    template may write a message's images before its videos, as LLaVA-OneVision's does)."""
    queues = {kind: [index for index, item in enumerate(media) if item.kind == kind] for kind in MODALITIES}
    return [queues[kind].pop(0) for _, kind in pads]


def _check_counts(pads: list[tuple[int, families.Kind]], media: list[MediaItem]) -> None:
    """Each media item needs its pad in the rendered prompt: as many of each kind."""
    in_prompt = [kind for _, kind in pads]
    given = [item.kind for item in media]
    if all(in_prompt.count(kind) == given.count(kind) for kind in MODALITIES):
        return
    counts = {kind: (in_prompt.count(kind), given.count(kind)) for kind in MODALITIES}
    detail = ", ".join(
        f"{kind}s: {found} in the prompt, {sent} sent" for kind, (found, sent) in counts.items()
    )
    raise ServiceError(
        f"the rendered prompt's image and video placeholders do not match the request's media ({detail}); "
        "the chat template may drop media parts of some roles, or a text part holds a placeholder token",
        "placeholder_mismatch",
        "messages",
    )
