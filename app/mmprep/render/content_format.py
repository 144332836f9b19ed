"""Whether a chat template takes a message's content as a string or as a list of parts,
detected from the template as vLLM detects it (`_detect_content_format` in
vllm/entrypoints/chat_utils.py): a template that loops over a message's content
(`{% for part in message['content'] %}`, `message.content`, through filters too) takes
OpenAI-style parts ("openai"); any other takes the text joined ("string").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import jinja2.nodes as nodes

ContentFormat = Literal["string", "openai"]


def detect_content_format(ast: nodes.Template) -> ContentFormat:
    return "openai" if next(_content_loops(ast), None) is not None else "string"


def _is_name(node: nodes.Node, name: str) -> bool:
    return isinstance(node, nodes.Name) and node.name == name


def _is_key_of(node: nodes.Node, name: str, key: str) -> bool:
    """`name[key]` or `name.key`."""
    if isinstance(node, nodes.Getitem):
        return _is_name(node.node, name) and isinstance(node.arg, nodes.Const) and node.arg.value == key
    if isinstance(node, nodes.Getattr):
        return _is_name(node.node, name) and node.attr == key
    return False


def _accesses(node: nodes.Node, name: str, key: str | None = None) -> bool:
    """`node` is the variable (or its `key`), or a filter, test, slice or index of it."""
    if (key is None and _is_name(node, name)) or (key is not None and _is_key_of(node, name, key)):
        return True
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return _accesses(node.node, name, key)
    if isinstance(node, nodes.Getitem) and key is None:  # messages[0]
        return _accesses(node.node, name, key)
    if isinstance(node, nodes.Filter | nodes.Test):
        return node.node is not None and _accesses(node.node, name, key)
    return False


def _loops_over(root: nodes.Node, name: str, key: str | None = None) -> Iterator[str]:
    """The targets of loops over `name` (or `name[key]`)."""
    for loop in root.find_all(nodes.For):
        if _accesses(loop.iter, name, key) and isinstance(loop.target, nodes.Name):
            yield loop.target.name


def _assigned_from(root: nodes.Node, name: str) -> Iterator[str]:
    """Names bound to `name` or to its items: loop targets and set targets."""
    yield from _loops_over(root, name)
    for assign in root.find_all(nodes.Assign):
        if _accesses(assign.node, name) and isinstance(assign.target, nodes.Name):
            yield assign.target.name


def _message_names(root: nodes.Node) -> Iterator[str]:
    seen = set()
    for name in _assigned_from(root, "messages"):
        if name not in seen:
            seen.add(name)
            yield name


def _content_loops(root: nodes.Node) -> Iterator[str]:
    for message in _message_names(root):
        yield from _loops_over(root, message, "content")
