"""Open-weight chat templates (Jinja2), rendered the way ``transformers``' ``apply_chat_template`` renders them,
producing parts in which only the template's own special tokens are special.

The environment is jinja2's ``ImmutableSandboxedEnvironment`` with ``trim_blocks``, ``lstrip_blocks`` and the
``loopcontrols`` extension, plus the helpers templates expect: ``raise_exception(msg)`` (-> :class:`ChatInputError`),
``strftime_now(fmt)`` and a ``tojson`` filter equal to ``json.dumps(x, ensure_ascii=False, indent=None,
separators=None, sort_keys=False)`` (jinja2's own escapes HTML characters). Messages are passed as dicts with
tool-call ``arguments`` parsed from JSON into objects (as vLLM does) and ``content`` as a string (``""`` for null),
except that content the caller sent as a list of text parts reaches a template that loops over message content
(decided as vLLM decides it, :mod:`.content_format`) as that list, ``[{"type": "text", "text": ...}, ...]``; a
template that expects a string gets the parts joined with ``"\\n"``.

Text stays text: before rendering, every string the caller supplied is escaped so that no special-token string
survives in it (each occurrence becomes a private-use marker group ``\\ue000<n>\\ue000``; a literal ``\\ue000`` is
group 0). The rendered string is then split on the special-token strings — which can now only come from the
template — and each text piece is unescaped back to the caller's characters. Escaping commutes with what templates
do to content (trim, split on ordinary markers, ``in`` tests, JSON quoting), because the markers are neither
whitespace nor ASCII. A special token could still be completed across a boundary if a template literal began or
ended with part of one; :class:`ChatTemplate` refuses such templates when it loads them.

Counting (:meth:`ChatTemplate.render_for_count`, used by the framing's ``count``) takes the same string from the
shape memo of :mod:`.shapes` for plain conversations whose text needs no escaping, and the sandbox remembers its
per-(type, name) attribute verdicts; neither changes what is rendered (both are tested against the plain paths).
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.runtime import LoopContext, Undefined, new_context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from . import content_format
from .messages import ChatInputError, ChatMessage, Conversation
from .parts import Parts, special_part
from .shapes import ShapeMemo

MARK = "\ue000"
#: What transformers 5's ``render_jinja_template`` appends to the final message for ``continue_final_message``.
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
#: Variables ``apply_chat_template`` sets itself (never taken from ``chat_template_kwargs``).
RESERVED_VARIABLES = ("messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
                      "chat_template", "tokenize")
_GROUP = re.compile(MARK + r"(\d+)" + MARK)


def _same(value: Any) -> Any:
    return value


def _raise_exception(message: str) -> None:
    raise ChatInputError(f"the chat template rejected the conversation: {message}")


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


_DICT_ATTRS = frozenset(dir(dict))
#: Exact types whose sandbox verdict on an attribute name is a function of (type, name) alone: none is a function,
#: method, type, code, frame, traceback, generator or coroutine (``is_internal_attribute``), and each is or is not a
#: mutable ABC once and for all (``modifies_known_mutable``); ``Namespace`` answers ``__class__`` truthfully.
_VERDICT_TYPES = frozenset({str, list, tuple, int, float, bool, type(None), LoopContext, Namespace})
_BOUND_METHODS = (types.MethodType, types.BuiltinMethodType)  # neither can be subclassed: type() is isinstance()
_STR_FORMAT = ("format", "format_map")


class _Sandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with two shortcuts that give its answers without its per-lookup work:

    * ``message.role`` on a plain dict has no such attribute, so the sandbox's answer is the item (or undefined) --
      given here without raising and catching the ``AttributeError`` first; dict method names take its path;
    * on the exact types of :data:`_VERDICT_TYPES` (strings, lists, loop and namespace objects …) the verdict of
      ``is_safe_attribute`` -- which ignores the value and depends only on the object's type and the name for
      them -- is computed once per (type, name) and remembered. Bound ``format``/``format_map`` methods (which the
      sandbox wraps) and missing attributes take the sandbox's own path.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._verdicts: dict[tuple[type, str], bool] = {}

    def getattr(self, obj: Any, attribute: str) -> Any | Undefined:
        kind = type(obj)
        if kind is dict and attribute not in _DICT_ATTRS:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        if kind in _VERDICT_TYPES and type(attribute) is str:
            try:
                value = getattr(obj, attribute)
            except AttributeError:
                return super().getattr(obj, attribute)
            if type(value) in _BOUND_METHODS and value.__name__ in _STR_FORMAT:
                return super().getattr(obj, attribute)
            key = (kind, attribute)
            safe = self._verdicts.get(key)
            if safe is None:
                safe = self.is_safe_attribute(obj, attribute, value)
                if len(self._verdicts) < 4096:
                    self._verdicts[key] = safe
            return value if safe else self.unsafe_undefined(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any | Undefined:
        if type(obj) is dict:
            try:
                return obj[argument]
            except KeyError:
                if not (isinstance(argument, str) and argument in _DICT_ATTRS):
                    return self.undefined(obj=obj, name=argument)
            except TypeError:
                pass
        return super().getitem(obj, argument)


def _environment() -> ImmutableSandboxedEnvironment:
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class _Splitter:
    """``finditer`` over the special-token strings of a text; names shaped ``<|…|>`` (most tokenizers) are found
    with one candidate pattern and a set lookup, which stays fast with hundreds of names."""

    _SHAPED = re.compile(r"<\|[^|<>]+\|>")

    def __init__(self, names: list[str]) -> None:
        self.known = frozenset(names)
        shaped = all(self._SHAPED.fullmatch(n) for n in names)
        longest = max(map(len, names))
        self.pattern = (re.compile(r"<\|[^|<>]{1,%d}\|>" % longest) if shaped  # noqa: UP031
                        else re.compile("|".join(map(re.escape, names))))
        self.shaped = shaped
        self.splitter = re.compile(f"({self.pattern.pattern})")

    def split(self, text: str) -> list[str]:
        """``[text, special, text, special, …, text]`` (always odd length; texts may be empty)."""
        pieces = self.splitter.split(text)
        if not self.shaped:
            return pieces
        known = self.known
        out: list[str] = []
        pending = [pieces[0]]  # the text since the last special (joined once: no quadratic concatenation)
        for i in range(1, len(pieces), 2):
            if pieces[i] in known:
                out += ("".join(pending), pieces[i])
                pending = [pieces[i + 1]]
            else:  # a lookalike that is no special of this tokenizer: text
                pending += (pieces[i], pieces[i + 1])
        out.append("".join(pending))
        return out


def _splitter(names: list[str]) -> _Splitter | None:
    return _Splitter(names) if names else None


class _Escaper:
    """Reversible removal of special-token strings from caller text (see the module docstring)."""

    def __init__(self, specials: Iterable[str]) -> None:
        self.names = sorted(set(specials), key=len, reverse=True)
        self.index = {name: i + 1 for i, name in enumerate(self.names)}
        self.split = _splitter(self.names)
        if self.split is not None and self.split.shaped:
            self.find = re.compile(re.escape(MARK) + "|" + self.split.pattern.pattern)
        else:
            self.find = re.compile("|".join([re.escape(MARK), *map(re.escape, self.names)]))
        # a string holding a special holds its first two characters; testing the last of those alone first is a
        # one-character search (memchr-fast), and most text fails it
        self.prefixes = tuple(sorted({n[:2] for n in self.names} | {MARK}))
        self._probes = tuple((p[-1], p) for p in self.prefixes)
        # names not shaped <|…|> (Gemma's <start_of_turn>, …) with few first characters: per first character, a
        # one-character search, then a search for the names themselves (their second characters are common letters)
        firsts = sorted({n[0] for n in self.names})
        self._exact = None if (self.split is None or self.split.shaped or len(firsts) > 4) else tuple(
            (f, re.compile("|".join(re.escape(n) for n in self.names if n[0] == f))) for f in firsts)

    def may_hold(self, value: str) -> bool:
        """False when ``value`` holds no special token and no marker (True may be a false alarm)."""
        if self._exact is not None:
            if MARK in value:
                return True
            for first, names in self._exact:
                if first in value and names.search(value) is not None:
                    return True
            return False
        for last, prefix in self._probes:
            if last in value and prefix in value:
                return True
        return False

    def _group(self, m: re.Match[str]) -> str:
        found = m.group()
        if found == MARK:
            return f"{MARK}0{MARK}"
        n = self.index.get(found)
        if n is None:  # a <|…|> lookalike that is not a special stays text, but a marker inside it is escaped too
            return found.replace(MARK, f"{MARK}0{MARK}") if MARK in found else found
        return f"{MARK}{n}{MARK}"

    def escape(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.find.sub(self._group, value) if self.may_hold(value) else value
        if isinstance(value, Mapping):
            return {self.escape(k): self.escape(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.escape(v) for v in value]
        return value

    def needed(self, conv: Conversation) -> bool:
        """False when no message string can hold a special or the marker; messages with tool calls always need the
        per-value pass (parsed arguments can hold characters their JSON text only escapes)."""
        may_hold = self.may_hold
        for m in conv.messages:
            if m.tool_calls or may_hold(m.content) or (m.name is not None and may_hold(m.name)) or (
                    m.tool_call_id is not None and may_hold(m.tool_call_id)):
                return True
        return False

    def unescape(self, text: str) -> str:
        if MARK not in text:
            return text

        def group(m: re.Match[str]) -> str:
            n = int(m.group(1))
            if n > len(self.names):
                raise ChatInputError("the chat template altered the caller's text in a way that cannot be undone")
            return MARK if n == 0 else self.names[n - 1]

        out = _GROUP.sub(group, text)
        if out.count(MARK) != sum(1 for m in _GROUP.finditer(text) if m.group(1) == "0"):
            raise ChatInputError("the chat template altered the caller's text in a way that cannot be undone")
        return out


class ChatTemplate:
    """A compiled chat template with its tokenizer-config variables (``bos_token``, …).

    Raises ``ValueError`` at construction for a template that does not compile, or whose literal text could join
    caller text into one of ``specials`` (see the module docstring).
    """

    def __init__(self, name: str, source: str, variables: Mapping[str, str], specials: Iterable[str]) -> None:
        self.name = name
        self.source = source
        self.variables = dict(variables)
        self.specials = tuple(specials)
        env = _environment()
        try:
            ast = env.parse(source)
            self._template = env.from_string(source)
        except jinja2.TemplateError as exc:
            raise ValueError(f"chat template {name!r} does not compile: {exc}") from None
        #: :data:`.content_format.OPENAI` when list content reaches the template as parts, else ``STRING``
        self.content_format = content_format.detect(ast)
        self._takes_parts = self.content_format == content_format.OPENAI
        self._env = env
        self._globals = dict(self._template.globals)  # flattened once (rendering copies them per call otherwise)
        self._escaper = _Escaper(self.specials)
        literals = [n.value for n in ast.find_all(nodes.Const) if isinstance(n.value, str)]
        literals += [n.data for n in ast.find_all(nodes.TemplateData)]
        self._check_literals(literals)
        # The only specials a render can contain: those in the template's literals and variables (caller text is
        # escaped, and no literal can complete a special with its neighbour). Splitting on just these is faster
        # than the general pattern and never takes a lookalike for one of the template's tokens.
        sources = [*literals, *self.variables.values()]
        own = sorted({n for n in self.specials if any(n in src for src in sources)}, key=len, reverse=True)
        self.own_specials: tuple[str, ...] = tuple(own)  # longest first: the order the split tries them in
        self._own_split = re.compile("(" + "|".join(map(re.escape, own)) + ")") if own else None
        self.shapes = ShapeMemo(env, source, self.variables, literals)

    def _check_literals(self, literals: list[str]) -> None:
        for literal in literals:
            for special in self.specials:
                for k in range(1, len(special)):
                    if literal.startswith(special[k:]) or literal.endswith(special[:k]):
                        raise ValueError(f"chat template {self.name!r}: the literal {literal[:40]!r} could complete "
                                         f"the special token {special!r} with caller text")

    def context(self, conv: Conversation, add_generation_prompt: bool, escape: bool) -> dict[str, Any]:
        """The variables the template sees (escaped caller strings when ``escape``)."""
        messages: list[dict[str, Any]] = []
        text = self._escaper.escape if escape and self._escaper.needed(conv) else _same
        for i, m in enumerate(conv.messages):
            item: dict[str, Any] = {"role": m.role, "content": text(self._content(m))}
            if m.name is not None:
                item["name"] = text(m.name)
            if m.tool_calls:
                item["tool_calls"] = text([
                    {**({"id": c.id} if c.id is not None else {}), "type": "function",
                     "function": {"name": c.name,
                                  "arguments": c.arguments_value(f"messages[{i}].tool_calls[{j}].function")}}
                    for j, c in enumerate(m.tool_calls)])
            if m.tool_call_id is not None:
                item["tool_call_id"] = text(m.tool_call_id)
            messages.append(item)
        escape_tools = self._escaper.escape if escape else _same
        tools = escape_tools([dict(t.raw) for t in conv.tools]) if conv.tools else None
        return {**self.variables, "messages": messages, "tools": tools, "documents": None,
                "add_generation_prompt": add_generation_prompt}

    def _content(self, m: ChatMessage) -> str | list[dict[str, str]]:
        if m.content_parts is None or not self._takes_parts:
            return m.content
        return [{"type": "text", "text": t} for t in m.content_parts]

    def takes_parts(self, conv: Conversation) -> bool:
        """True when some message of ``conv`` reaches the template as a list of parts."""
        return self._takes_parts and any(m.content_parts is not None for m in conv.messages)

    def render(self, conv: Conversation, *, add_generation_prompt: bool = True) -> str:
        """The template's output as one string, exactly as ``apply_chat_template(tokenize=False)`` returns it."""
        return self._render(self.context(conv, add_generation_prompt, escape=False))

    def _render(self, context: dict[str, Any]) -> str:
        """What ``Template.render(**context)`` returns, without re-flattening the globals on every call."""
        template = self._template
        try:
            ctx = new_context(self._env, template.name, template.blocks, {**self._globals, **context}, shared=True,
                              globals=self._globals)
            return self._env.concat(template.root_render_func(ctx))  # type: ignore[attr-defined]
        except ChatInputError:
            raise
        except jinja2.exceptions.SecurityError as exc:
            raise ChatInputError(f"the chat template tried an unsafe operation: {exc}") from None
        except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise ChatInputError(f"the chat template cannot render this conversation: {exc}") from None
        except (OverflowError, RecursionError) as exc:  # not reached within the limits of .limits: a last resort
            raise ChatInputError(f"the chat template cannot render this conversation: {type(exc).__name__}") \
                from None

    def render_escaped(self, conv: Conversation, *, add_generation_prompt: bool = True) -> str:
        """The template's output with caller text escaped (see the module docstring): its only special-token
        strings are the template's own (:attr:`own_specials`); it holds :data:`MARK` only where caller text was
        escaped, and then only :meth:`parts_of` reads it correctly."""
        return self._render(self.context(conv, add_generation_prompt, escape=True))

    def render_for_count(self, conv: Conversation, *, add_generation_prompt: bool = True) -> str:
        """:meth:`render_escaped`'s output; for a plain conversation whose text needs no escaping (then the two
        renders are one string) from the shape memo (:mod:`.shapes`, string contents only) when it has or can learn
        the shape."""
        if not self._escaper.needed(conv) and not self.takes_parts(conv):
            rendered = self.shapes.render(conv, add_generation_prompt)
            if rendered is not None:
                return rendered
        return self.render_escaped(conv, add_generation_prompt=add_generation_prompt)

    def frame_with(self, conv: Conversation, *, add_generation_prompt: bool = True,
                   continue_final_message: bool = False, variables: Mapping[str, Any] | None = None) -> Parts:
        """:meth:`frame` with ``apply_chat_template``'s other options: ``variables`` are extra template variables
        (``chat_template_kwargs``; their strings are caller text, escaped like the messages), and
        ``continue_final_message`` leaves the last message open as transformers 5 does it (a tag appended to its
        content, the render cut where the tag starts, trailing whitespace trimmed if the template trimmed the tag's
        space). Raises :class:`ChatInputError` when the template rejects the conversation, when both
        ``add_generation_prompt`` and ``continue_final_message`` are set, when a variable would replace one the
        renderer sets (``messages``, ``tools``, ``bos_token``, ...), or when the final message is not found."""
        if continue_final_message and add_generation_prompt:
            raise ChatInputError("continue_final_message and add_generation_prompt are not compatible",
                                 "continue_final_message")
        context = self.context(conv, add_generation_prompt, escape=True)
        if variables:
            clash = sorted(set(variables) & (set(context) | set(RESERVED_VARIABLES)))
            if clash:
                raise ChatInputError(f"chat_template_kwargs: {clash[0]!r} is set by the renderer itself",
                                     f"chat_template_kwargs.{clash[0]}")
            context.update(self._escaper.escape(dict(variables)))
        if not continue_final_message:
            return self.parts_of(self._render(context))
        last = context["messages"][-1]
        final = last["content"]
        last["content"] = final + CONTINUE_TAG
        rendered = self._render(context)
        if final.strip() not in rendered or CONTINUE_TAG.strip() not in rendered:
            raise ChatInputError("continue_final_message is set but the final message does not appear in the "
                                 "rendered prompt", "continue_final_message")
        at = rendered.rindex(CONTINUE_TAG.strip())
        rendered = rendered[:at] if rendered[at:at + len(CONTINUE_TAG)] == CONTINUE_TAG else rendered[:at].rstrip()
        return self.parts_of(rendered)

    def parts_of(self, rendered: str) -> Parts:
        """:meth:`render_escaped`'s output as parts: the template's special-token strings as specials, the rest
        (unescaped back to the caller's characters) as text."""
        out = Parts()
        pieces = self._own_split.split(rendered) if self._own_split is not None else [rendered]
        unescape = self._escaper.unescape
        items = out.items
        last = len(pieces) - 1
        for i in range(0, len(pieces), 2):
            text = pieces[i]
            if text:
                items.append(unescape(text) if MARK in text else text)
            if i < last:
                items.append(special_part(pieces[i + 1]))
        return out

    def frame(self, conv: Conversation, *, add_generation_prompt: bool = True) -> Parts:
        """The rendered prompt as parts: the template's special-token strings as specials, the rest as text."""
        return self.parts_of(self.render_escaped(conv, add_generation_prompt=add_generation_prompt))
