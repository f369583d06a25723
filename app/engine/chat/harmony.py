"""The Harmony format of gpt-oss: a conversation as ``<|start|>{header}<|message|>{content}<|end|>`` messages.

Mapping from Chat Completions messages (as the gpt-oss template and vLLM map them):

* a system message comes first, always: model identity, knowledge cutoff 2024-06, ``Reasoning: medium``, the
  valid channels (and, when function tools exist, that calls go to the commentary channel);
* the first system or developer message becomes the developer message's ``# Instructions``; ``tools`` go into the
  developer message as ``namespace functions`` (:mod:`.typescript`); later system/developer messages become further
  developer messages with their text as instructions;
* ``user``; assistant text goes to channel ``final``; an assistant's text next to tool calls goes to channel
  ``commentary``; each tool call is
  ``assistant to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>ARGS<|call|>``;
* a tool result is ``functions.NAME to=assistant<|channel|>commentary<|message|>…<|end|>``, ``NAME`` found through
  ``tool_call_id`` (else the latest call);
* an author ``name`` renders as ``ROLE:NAME`` (``:NAME`` its own text piece) for every role but tools, whose author
  is ``functions.NAME`` alone (openai-harmony ``src/encoding.rs``, ``Render<Message>``): ``user:NAME``,
  ``assistant:NAME`` on each message an assistant turn becomes, ``developer:NAME`` for a system/developer message;
* list content: a user message and an assistant's ``final`` text are one text content per part, back to back, each
  encoded on its own with no separator (openai-harmony renders a message's contents one by one; vLLM's Harmony path,
  ``parse_chat_input_to_harmony_message``, builds one ``TextContent`` per part); instructions, an assistant's
  ``commentary`` text and tool results are the parts joined with ``""`` as one text (vLLM's
  ``flatten_input_text_content``: those are single strings in Harmony);
* with ``add_generation_prompt``, ``<|start|>assistant`` ends the prompt.

Every header and content piece is ordinary text: the parts segment text exactly where ``openai-harmony`` calls its
ordinary encoder, so ids are equal to its ``render_conversation_for_completion``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .messages import ChatInputError, ChatMessage, Conversation, Tool
from .parts import Parts
from .typescript import rust_lines, to_typescript

START, MESSAGE, END, CALL = "<|start|>", "<|message|>", "<|end|>", "<|call|>"
CHANNEL, CONSTRAIN = "<|channel|>", "<|constrain|>"

MODEL_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
KNOWLEDGE_CUTOFF = "2024-06"
REASONING = "medium"
CHANNELS = ("analysis", "commentary", "final")


def _system_text(has_function_tools: bool) -> str:
    channels = f"# Valid channels: {', '.join(CHANNELS)}. Channel must be included for every message."
    if has_function_tools:
        channels += "\nCalls to these tools must go to the commentary channel: 'functions'."
    return "\n\n".join([f"{MODEL_IDENTITY}\nKnowledge cutoff: {KNOWLEDGE_CUTOFF}", f"Reasoning: {REASONING}",
                        channels])


def tools_section(tools: tuple[Tool, ...]) -> str:
    """The ``# Tools`` section of the developer message for function tools."""
    lines = ["## functions\n", "namespace functions {\n"]
    for tool in tools:
        lines.extend(f"// {line}" for line in rust_lines(tool.description or ""))
        if tool.parameters is not None:
            lines.append(f"type {tool.name} = (_: {to_typescript(tool.parameters)}) => any;\n")
        else:
            lines.append(f"type {tool.name} = () => any;\n")
    lines.append("} // namespace functions")
    return "# Tools\n\n" + "\n".join(lines)


def _developer_text(instructions: str | None, tools: tuple[Tool, ...]) -> str:
    sections = []
    if instructions is not None:
        sections += ["# Instructions", instructions]
    if tools:
        sections.append(tools_section(tools))
    return "\n\n".join(sections)


def _contents(m: ChatMessage) -> Sequence[str]:
    """The message's text contents: one per part for list content, else its one string."""
    return m.content_parts if m.content_parts is not None else (m.content,)


def _flat(m: ChatMessage) -> str:
    """The message's text as one string: list content joined with ``""`` (as vLLM flattens it)."""
    return "".join(m.content_parts) if m.content_parts is not None else m.content


def _message(out: Parts, author: str, contents: str | Sequence[str], *, name: str | None = None,
             recipient: str | None = None, channel: str | None = None, constrain: bool = False,
             end: str = END) -> None:
    out.special(START)
    out.text(author)
    if name is not None:
        out.text(f":{name}")
    if recipient is not None:
        out.text(f" to={recipient}")
    if channel is not None:
        out.special(CHANNEL)
        out.text(channel)
    if constrain:
        out.text(" ")
        out.special(CONSTRAIN)
        out.text("json")
    out.special(MESSAGE)
    if isinstance(contents, str):
        out.text(contents)
    else:
        for text in contents:
            out.text(text)
    out.special(end)


def frame(conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
    """The Harmony prompt of ``conv`` as parts. Raises :class:`ChatInputError` for a tool result without a call."""
    out = Parts()
    _message(out, "system", _system_text(bool(conv.tools)))
    messages = list(conv.messages)
    instructions = author_name = None
    if messages and messages[0].role in ("system", "developer"):
        first = messages.pop(0)
        instructions, author_name = _flat(first), first.name
    if instructions is not None or conv.tools:
        _message(out, "developer", _developer_text(instructions, conv.tools), name=author_name)
    calls: dict[str, str] = {}
    last_call: str | None = None
    for i, m in enumerate(messages, start=len(conv.messages) - len(messages)):
        if m.role in ("system", "developer"):
            _message(out, "developer", _developer_text(_flat(m), ()), name=m.name)
        elif m.role == "user":
            _message(out, "user", _contents(m), name=m.name)
        elif m.role == "assistant":
            _assistant(out, m)
            for call in m.tool_calls:
                last_call = call.name
                if call.id is not None:
                    calls[call.id] = call.name
        else:
            name = calls.get(m.tool_call_id or "", last_call) if m.tool_call_id in calls else last_call
            if name is None:
                raise ChatInputError(f"messages[{i}]: a tool result needs an earlier assistant tool call",
                                     f"messages[{i}]")
            _message(out, f"functions.{name}", _flat(m), recipient="assistant", channel="commentary")
    if add_generation_prompt:
        out.special(START)
        out.text("assistant")
    return out


def _assistant(out: Parts, m: ChatMessage) -> None:
    if not m.tool_calls:
        _message(out, "assistant", _contents(m), name=m.name, channel="final")
        return
    text = _flat(m)
    if text:
        _message(out, "assistant", text, name=m.name, channel="commentary")
    for call in m.tool_calls:
        _message(out, "assistant", call.arguments, name=m.name, recipient=f"functions.{call.name}",
                 channel="commentary", constrain=True, end=CALL)
