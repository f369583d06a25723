"""Which ``content`` shape a chat template expects: a string, or the OpenAI list of parts.

Decided from the template's Jinja AST by the rule vLLM applies (``vllm/entrypoints/chat_utils.py``,
``_detect_content_format`` and ``_resolve_chat_template_content_format``), so a conversation with list content reaches
the template as it reaches it in vLLM:

* the names bound to the conversation are ``messages`` and, transitively, every ``{% set x = ... %}`` whose value is
  one of those names (seen through filters, tests and slices: ``messages[1:]``, ``messages | reverse``);
* a message variable is the target of a ``{% for m in <such a name> %}`` loop;
* a template that loops over ``m['content']`` or ``m.content`` (again through filters, tests and slices) of such a
  message variable takes :data:`OPENAI` content: a list of ``{"type": "text", "text": ...}`` parts; any other
  template takes :data:`STRING` content: the parts joined with ``"\\n"``.

Like vLLM's, the rule ignores scopes, and a template it cannot read (a tuple unpacked where a name is expected) is
given string content.
"""

from __future__ import annotations

from jinja2 import nodes

STRING = "string"
OPENAI = "openai"


class _Unreadable(Exception):
    """A construct the rule does not read (vLLM falls back to string content for it)."""


def _peel(node: nodes.Node) -> nodes.Node:
    """``node`` without the filters, tests and slices around it."""
    while True:
        if isinstance(node, nodes.Filter) and node.node is not None:
            node = node.node
        elif isinstance(node, nodes.Test):
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
            node = node.node
        else:
            return node


def _is_name(node: nodes.Node, names: set[str]) -> bool:
    return isinstance(node, nodes.Name) and node.ctx == "load" and node.name in names


def _refers_to(node: nodes.Node, names: set[str]) -> bool:
    """``node`` reads one of ``names`` (through filters, tests and slices)."""
    return _is_name(_peel(node), names)


def _reads_content(node: nodes.Node, names: set[str]) -> bool:
    """``node`` reads ``NAME['content']`` or ``NAME.content`` for one of ``names`` (through filters, tests, slices)."""
    node = _peel(node)
    if isinstance(node, nodes.Getitem):
        return isinstance(node.arg, nodes.Const) and node.arg.value == "content" and _is_name(node.node, names)
    if isinstance(node, nodes.Getattr):
        return node.attr == "content" and _is_name(node.node, names)
    return False


def _target(node: nodes.Node) -> str:
    if not isinstance(node, nodes.Name):
        raise _Unreadable
    return node.name


def _message_lists(root: nodes.Template) -> set[str]:
    names = {"messages"}
    assigns = list(root.find_all(nodes.Assign))
    grew = True
    while grew:
        grew = False
        for assign in assigns:
            if _refers_to(assign.node, names):
                name = _target(assign.target)
                if name not in names:
                    names.add(name)
                    grew = True
    return names


def detect(root: nodes.Template) -> str:
    """:data:`OPENAI` when the template loops over a message's content, else :data:`STRING` (see the module doc)."""
    try:
        lists = _message_lists(root)
        loops = list(root.find_all(nodes.For))
        messages = {_target(loop.target) for loop in loops if _refers_to(loop.iter, lists)}
        for loop in loops:
            if _reads_content(loop.iter, messages):
                _target(loop.target)
                return OPENAI
    except _Unreadable:
        return STRING
    return STRING
