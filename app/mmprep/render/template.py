"""A chat template rendered as transformers' `apply_chat_template` renders it.

The same jinja2 environment (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, the
loopcontrols extension and a `{% generation %}` block that renders its body), the same
`tojson` filter (no HTML escaping, ensure_ascii off), the same globals (raise_exception,
strftime_now, a dict() and a namespace() that refuse underscore names), and the same inputs:
messages, tools, documents, add_generation_prompt, the tokenizer's special tokens (bos_token,
eos_token, ...) and the caller's kwargs over them. Reasoning is aliased under
reasoning_content and thinking, and continue_final_message cuts the render after the final
message's text, as transformers does. Each template is compiled once (`compile_template`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

# The names a message's reasoning comes under; templates read the first.
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


class TemplateInputError(ValueError):
    """The inputs cannot be rendered with this template (continue_final_message without a
    final message to continue, ...); `str(error)` says why."""


class _GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: transformers marks assistant text with it
    (for its assistant-token masks); a plain render outputs the body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format):
    return datetime.now().strftime(format)


class _TemplateDict:
    """dict() for templates, without dict's class attributes to climb through."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """namespace() refusing attribute names that start with an underscore."""

    def __init__(*args, **kwargs):  # jinja's own signature trick, so namespace(self=...) works
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscore-prefixed attributes on a namespace, got {name!r}"
            )


def _environment() -> ImmutableSandboxedEnvironment:
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    environment.globals["dict"] = _TemplateDict()
    environment.globals["namespace"] = _TemplateNamespace
    return environment


@dataclass(frozen=True)
class CompiledTemplate:
    source: str
    template: jinja2.Template
    variables: frozenset[str]  # the names the template reads from its context
    ast: jinja2.nodes.Template

    def render(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        documents: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        special_tokens: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        """The rendered prompt. Raises jinja2's TemplateError when the template refuses the
        input (raise_exception) or fails on it, TemplateInputError for inputs transformers
        refuses before rendering."""
        chat = _alias_reasoning([dict(message) for message in messages])
        final_text = None
        if continue_final_message:
            final_text = _tag_final_message(chat, self.source)
        context = {**(special_tokens or {}), **kwargs}
        rendered = self.template.render(
            messages=chat,
            tools=tools,
            documents=documents,
            add_generation_prompt=add_generation_prompt,
            **context,
        )
        if final_text is not None:
            rendered = _cut_after_final_message(rendered, final_text)
        return rendered


@lru_cache(maxsize=16)
def compile_template(source: str) -> CompiledTemplate:
    """The template compiled in transformers' sandbox, once per template text."""
    environment = _environment()
    ast = environment.parse(source)
    return CompiledTemplate(
        source=source,
        template=environment.from_string(source),
        variables=frozenset(jinja2.meta.find_undeclared_variables(ast)),
        ast=ast,
    )


def _alias_reasoning(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's reasoning under any of its names is passed as reasoning_content and as
    thinking too (gpt-oss templates read that one), as transformers does."""
    aliased = []
    for message in chat:
        reasoning = next((message[key] for key in REASONING_FIELDS if message.get(key) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        aliased.append(message)
    return aliased


def _tag_final_message(chat: list[dict[str, Any]], source: str) -> str:
    """Mark where the final message's text ends (transformers' continue_final_message) and
    return that text."""
    if not chat:
        raise TemplateInputError("continue_final_message is set but there are no messages")
    final = chat[-1]
    content = final.get("content")
    if content is None:
        raise TemplateInputError(
            "continue_final_message is set but the final message has no content to continue"
        )
    if "content" not in source:
        raise TemplateInputError(
            "continue_final_message is set but this chat template does not read 'content'"
        )
    if isinstance(content, list | tuple):
        parts = [dict(part) if isinstance(part, dict) else part for part in content]
        for part in reversed(parts):
            if isinstance(part, dict) and "text" in part:
                text = part["text"]
                part["text"] = text + _CONTINUE_TAG
                break
        else:
            raise TemplateInputError(
                "continue_final_message is set but the final message has no text to continue"
            )
        chat[-1] = {**final, "content": parts}
        return text
    chat[-1] = {**final, "content": content + _CONTINUE_TAG}
    return content


def _cut_after_final_message(rendered: str, final_text: str) -> str:
    tag = _CONTINUE_TAG.strip()
    if final_text.strip() not in rendered or tag not in rendered:
        raise TemplateInputError(
            "continue_final_message is set but the chat template drops part of the final message"
        )
    at = rendered.rindex(tag)
    if rendered[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return rendered[:at]
    return rendered[:at].rstrip()  # the template trimmed the message's trailing space
