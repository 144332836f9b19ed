"""Whether a chat template takes a message's content as a string or as a list of parts,
detected from the template as vLLM 0.33 detects it (`_detect_content_format` in
vllm/renderers/hf.py): a template that loops over a message's content takes OpenAI-style parts
("openai"); any other takes the text joined ("string").

A loop over a message's content is one over `message['content']` or `message.content` (through
filters, tests and slices) where `message` is a loop target over the messages or over a name
bound to them (`set`, `namespace(rest=messages)`, `ns.rest = messages`, followed from name to
name); or, inside a macro, one over a parameter that some call passes such a content (as
Qwen3.5's `render_content(message.content, ...)`); or, outside macros, one over a variable
named `content`. A matching loop whose target is not one name (`for a, b in ...`) makes vLLM's
detection fail, and it falls back to "string".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

import jinja2.nodes as nodes

ContentFormat = Literal["string", "openai"]


def detect_content_format(ast: nodes.Template) -> ContentFormat:
    try:
        found = next(_content_loops(ast), None)
    except _NotOneName:
        return "string"
    return "string" if found is None else "openai"


class _NotOneName(Exception):
    """A loop over the messages or a content binds a tuple: vLLM's detection fails there."""


def _is_name(node: nodes.Node, name: str) -> bool:
    """The variable `name` read, or a dotted alias (`ns.rest`) read as its attribute."""
    if isinstance(node, nodes.Name):
        return node.ctx == "load" and node.name == name
    if isinstance(node, nodes.Getattr) and "." in name:
        base, _, attr = name.rpartition(".")
        return node.attr == attr and _is_name(node.node, base)
    return False


def _is_key_of(node: nodes.Node, name: str, key: str) -> bool:
    """`name[key]` or `name.key`."""
    if isinstance(node, nodes.Getitem):
        return _is_name(node.node, name) and isinstance(node.arg, nodes.Const) and node.arg.value == key
    if isinstance(node, nodes.Getattr):
        return _is_name(node.node, name) and node.attr == key
    return False


def _accesses(node: nodes.Node, name: str, key: str | None = None) -> bool:
    """`node` is the variable (or its `key`), or a filter, test or slice of it."""
    if isinstance(node, nodes.Filter | nodes.Test):
        return node.node is not None and _accesses(node.node, name, key)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return _accesses(node.node, name, key)
    return _is_key_of(node, name, key) if key else _is_name(node, name)


def _dotted(node: nodes.Node) -> str | None:
    """An attribute target (`ns.rest`) as the dotted name it binds."""
    if isinstance(node, nodes.NSRef):
        return f"{node.name}.{node.attr}"
    attrs = []
    while isinstance(node, nodes.Getattr):
        attrs.append(node.attr)
        node = node.node
    return ".".join([node.name, *reversed(attrs)]) if isinstance(node, nodes.Name) else None


def _aliases(root: nodes.Node, name: str) -> Iterator[str]:
    """`name`, and every name bound to it or to a name bound to it, breadth first."""
    yield name
    seen, pending = {name}, deque([name])
    while pending:
        source = pending.popleft()
        for assign in root.find_all(nodes.Assign):
            target, value = assign.target, assign.node
            bound: list[str] = []
            if isinstance(target, nodes.Name) and _accesses(value, source):
                bound.append(target.name)
            if (
                isinstance(target, nodes.Name)
                and isinstance(value, nodes.Call)
                and isinstance(value.node, nodes.Name)
                and value.node.name == "namespace"
            ):
                bound += [f"{target.name}.{kw.key}" for kw in value.kwargs if _accesses(kw.value, source)]
            elif isinstance(target, nodes.Getattr | nodes.NSRef) and _accesses(value, source):
                dotted = _dotted(target)
                bound += [dotted] if dotted is not None else []
            for alias in bound:
                yield alias
                if alias not in seen:
                    seen.add(alias)
                    pending.append(alias)


def _message_names(root: nodes.Node) -> list[str]:
    """The targets of loops over the messages (or over a name bound to them)."""
    messages = list(_aliases(root, "messages"))
    return [
        _target_name(loop)
        for loop in root.find_all(nodes.For)
        if any(_accesses(loop.iter, name) for name in messages)
    ]


def _target_name(loop: nodes.For) -> str:
    if not isinstance(loop.target, nodes.Name):
        raise _NotOneName
    return loop.target.name


def _content_parameters(root: nodes.Node, macro: nodes.Macro, messages: list[str]) -> set[str]:
    """The parameters of `macro` that some call of it passes a message's content."""
    names = {arg.name for arg in macro.args}
    found = set()
    for call in root.find_all(nodes.Call):
        if not (isinstance(call.node, nodes.Name) and call.node.name == macro.name):
            continue
        for arg, parameter in zip(call.args, macro.args, strict=False):
            if any(_accesses(arg, message, "content") for message in messages):
                found.add(parameter.name)
        for keyword in call.kwargs:
            if keyword.key in names and any(_accesses(keyword.value, m, "content") for m in messages):
                found.add(keyword.key)
    return found


def _content_loops(root: nodes.Node) -> Iterator[nodes.For]:
    messages = _message_names(root)
    in_macros: set[int] = set()
    parameters: dict[int, set[str]] = {}  # a loop in a macro -> the macro's content parameters
    for macro in root.find_all(nodes.Macro):
        content = _content_parameters(root, macro, messages)
        for loop in macro.find_all(nodes.For):
            in_macros.add(id(loop))
            if content:
                parameters[id(loop)] = content
    for loop in root.find_all(nodes.For):
        bare = loop.iter.name if isinstance(loop.iter, nodes.Name) else None
        if (
            any(_accesses(loop.iter, message, "content") for message in messages)
            or (bare is not None and bare in parameters.get(id(loop), ()))
            or (bare == "content" and id(loop) not in in_macros)
        ):
            _target_name(loop)  # raises _NotOneName for a tuple target, as vLLM's assert fails
            yield loop
