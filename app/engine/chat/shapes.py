"""Render-structure reuse for chat templates: a conversation's rendered prompt from a memo of its *shape*.

Rendering a Jinja template costs more than its output is worth when conversations differ only in their message
texts. For the plain conversations that dominate traffic (every message ``{role, content}``, no tools, names or
tool calls), :class:`ShapeMemo` renders the template once per shape -- the roles in order and
``add_generation_prompt`` -- with each content replaced by a stand-in (:class:`_Sym`), and remembers

* the output as literal pieces between content slots, each slot naming a message and the transforms the template
  applied to it (so far only jinja2's ``trim`` filter);
* every observation the template made of a content (``startswith``/``endswith``, ``x in content``, equality,
  truthiness) with its outcome on the conversation that was rendered.

Another conversation of that shape reuses the entry when every recorded observation has the same outcome on its
contents; its prompt is then the pieces with its transformed contents put in the slots. That string is the one the
template would render: the template's output is a deterministic function of the context's other values (the shape)
and of what it observed of the contents, which are the same, and contents reach the output only through the slots.

What makes that hold is that nothing can observe a stand-in unrecorded. A stand-in is a ``str`` subclass whose
every other operation (length, iteration, indexing, hashing, ordering, formatting, ``repr``, any other method,
arithmetic but ``+`` with strings) raises :class:`Unsupported`, a ``BaseException`` that no ``except Exception``
in jinja2 or in a filter swallows. The memo's own sandbox (a separate, stricter environment; the real render is
untouched) wraps every filter and test -- only ``trim`` on a stand-in, ``length`` of a container and the type-only
tests pass, anything else that receives a stand-in (even inside a list or dict) raises --, allows only calls to
builtin methods of plain objects, ``namespace``, ``range``, ``dict`` and loop methods (and none with a stand-in as
argument; ``raise_exception``, ``strftime_now`` and the rest raise), refuses attribute and item access on
stand-ins, and compiles the template with a code generator that sends ``a in b`` through a check (a stand-in
cannot intercept ``content in "literal"`` itself). Templates with constructs that turn output into a plain string
the template could inspect (``~``, ``{% set %}…{% endset %}``, macros, call and filter blocks, blocks, recursive
loops, includes) get no memo. Slots are marked in the output with a private-use character, a per-render random
nonce and an index; output holding that character anywhere else is not memoised. Any exception during a shape
render means: render normally.

The memo is bounded in bytes, not entries: each learnt entry and each remembered failure is charged its estimated
size (:func:`deep_size` of its key, literal pieces, slots and observations; a 1,024-message shape is hundreds of
kilobytes), and once a template's memo holds :data:`MAX_MEMO_BYTES` it learns nothing more (new shapes render
normally).
"""

from __future__ import annotations

import re
import secrets
import sys
import threading
import types
from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.runtime import LoopContext, new_context
from jinja2.sandbox import safe_range
from jinja2.utils import Namespace

from .messages import Conversation

SLOT = "\ue001"  # marks content slots in a shape render's output (must occur nowhere else in it)

#: Node types whose presence rules a template out (they turn output or stand-ins into plain strings the template
#: could then inspect unseen, or pull in other templates).
REFUSED_NODES = (nodes.Concat, nodes.AssignBlock, nodes.Macro, nodes.CallBlock, nodes.FilterBlock, nodes.Block,
                 nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)
#: Tests whose answer for a ``str`` does not depend on which string it is.
TYPE_TESTS = frozenset({"string", "defined", "undefined", "none", "mapping", "iterable", "sequence", "number",
                        "integer", "float", "boolean", "true", "false", "callable", "escaped"})
#: Estimated bytes one template's memo may hold (entries and failure records together), per worker process.
MAX_MEMO_BYTES = 8 * 2**20
MAX_ENTRIES_PER_SHAPE = 4
MAX_FAILURES_PER_SHAPE = 8
#: Bytes charged for one failure record besides its key (the dict slot and the count).
_FAILURE_BYTES = 120


def deep_size(obj: Any) -> int:
    """Estimated bytes of ``obj`` and what it holds (tuples, lists, strings, numbers; each object once): an upper
    bound of what keeping it costs (objects shared with others, such as interned role names, are counted too)."""
    seen: set[int] = set()
    total = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, tuple | list):
            stack.extend(item)
    return total


class Unsupported(BaseException):  # noqa: N818 -- a control-flow signal, not an error
    """The template did something to a stand-in that the memo cannot account for: render normally."""


def _refuse(*_: Any, **__: Any) -> Any:
    raise Unsupported


class _Recorder:
    """State of one shape render: the real contents, the slots handed out and the observations made."""

    def __init__(self, contents: list[str]) -> None:
        self.contents = contents
        self.nonce = secrets.token_hex(8)
        self.slots: list[tuple[int, tuple[tuple[str, str | None], ...]]] = []  # slot -> (message, transforms)
        self.observed: list[tuple[int, tuple[tuple[str, str | None], ...], str, Any, Any]] = []

    def atom(self, index: int, transforms: tuple[tuple[str, str | None], ...]) -> _Sym:
        self.slots.append((index, transforms))
        sym = _Sym(f"{SLOT}{self.nonce}:{len(self.slots) - 1}{SLOT}")
        sym.recorder, sym.ref = self, (index, transforms)
        return sym

    def observe(self, ref: tuple[int, tuple[tuple[str, str | None], ...]], op: str, arg: Any) -> Any:
        result = _OBSERVATIONS[op](_apply(self.contents[ref[0]], ref[1]), arg)
        self.observed.append((ref[0], ref[1], op, arg, result))
        return result


def _apply(text: str, transforms: tuple[tuple[str, str | None], ...]) -> str:
    for op, chars in transforms:
        if op == "strip":  # jinja2's trim filter: soft_str(value).strip(chars)
            text = text.strip(chars)
        else:
            raise AssertionError(op)
    return text


_OBSERVATIONS: dict[str, Callable[[str, Any], Any]] = {
    "bool": lambda s, _: bool(s),
    "eq": lambda s, other: s == other,
    "contains": lambda s, needle: needle in s,
    "startswith": lambda s, prefix: s.startswith(prefix),
    "endswith": lambda s, suffix: s.endswith(suffix),
}


def _plain_arg(value: Any) -> bool:
    """A plain string (or tuple of them) that holds no slot mark: safe to observe a content with."""
    if type(value) is str:
        return SLOT not in value
    return type(value) is tuple and all(type(v) is str and SLOT not in v for v in value)


class _Sym(str):
    """A stand-in for one content (``ref`` set: an atom, possibly transformed) or for text built from contents and
    strings by ``+`` (``ref`` None: a compound, which may only be concatenated further and output)."""

    recorder: _Recorder
    ref: tuple[int, tuple[tuple[str, str | None], ...]] | None = None

    def _compound(self, text: str) -> _Sym:
        sym = _Sym(text)
        sym.recorder = self.recorder
        return sym

    def __add__(self, other: Any) -> _Sym:
        if not isinstance(other, str):
            raise Unsupported
        return self._compound(str.__add__(self, other))

    def __radd__(self, other: Any) -> _Sym:
        if not isinstance(other, str):
            raise Unsupported
        return self._compound(str.__add__(other, self))

    def _atom(self) -> tuple[int, tuple[tuple[str, str | None], ...]]:
        if self.ref is None:
            raise Unsupported
        return self.ref

    def __bool__(self) -> bool:
        return bool(self.recorder.observe(self._atom(), "bool", None))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Sym) or (isinstance(other, str) and not _plain_arg(other)):
            raise Unsupported
        if type(other) is not str:
            return False  # a str never equals a non-string (jinja2's Undefined included)
        return bool(self.recorder.observe(self._atom(), "eq", other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __contains__(self, needle: object) -> bool:
        if not _plain_arg(needle) or type(needle) is not str:
            raise Unsupported
        return bool(self.recorder.observe(self._atom(), "contains", needle))

    def predicate(self, op: str) -> _Observer:
        return _Observer(self.recorder, self._atom(), op)

    __hash__ = _refuse  # type: ignore[assignment]
    __len__ = __iter__ = __getitem__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse  # type: ignore[assignment]
    __mul__ = __rmul__ = __mod__ = __rmod__ = __format__ = __repr__ = __getnewargs__ = _refuse  # type: ignore
    __reduce__ = __reduce_ex__ = __copy__ = __deepcopy__ = _refuse  # type: ignore[assignment]


class _Observer:
    """A stand-in's ``startswith``/``endswith``: calling it records the observation; it cannot be shown."""

    __slots__ = ("recorder", "ref", "op")

    def __init__(self, recorder: _Recorder, ref: tuple[int, tuple[tuple[str, str | None], ...]], op: str) -> None:
        self.recorder, self.ref, self.op = recorder, ref, op

    def __call__(self, arg: Any) -> bool:
        if not _plain_arg(arg):
            raise Unsupported
        return bool(self.recorder.observe(self.ref, self.op, arg))

    __str__ = __repr__ = __format__ = __hash__ = __eq__ = __reduce__ = _refuse  # type: ignore[assignment]


def _holds_sym(value: Any, depth: int = 0) -> bool:
    """True if ``value`` is or contains (through lists, tuples, dicts, namespaces) a stand-in or a slot mark."""
    if isinstance(value, str):
        return type(value) is _Sym or SLOT in value
    if depth > 50:
        return True
    if isinstance(value, list | tuple):
        return any(_holds_sym(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_sym(k, depth + 1) or _holds_sym(v, depth + 1) for k, v in value.items())
    if isinstance(value, Namespace):
        return True
    return False


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if name == "trim" and args and type(args[0]) is _Sym:  # do_trim(value, chars=None)
            subject = args[0]
            chars = args[1] if len(args) > 1 else kwargs.get("chars")
            if len(args) > 2 or set(kwargs) - {"chars"} or (chars is not None and (
                    type(chars) is not str or not _plain_arg(chars))) or subject.ref is None:
                raise Unsupported
            index, transforms = subject.ref
            return subject.recorder.atom(index, (*transforms, ("strip", chars)))
        if name in ("length", "count") and len(args) == 1 and not kwargs and type(args[0]) in (list, tuple, dict):
            return func(*args)  # the size of a container does not look at its items
        if any(_holds_sym(v) for v in (*args, *kwargs.values())):
            raise Unsupported
        return func(*args, **kwargs)

    guarded.__dict__.update(getattr(func, "__dict__", {}))  # keeps jinja2's pass_context/pass_eval_context marks
    return guarded


def _guard_test(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(value: Any, *args: Any, **kwargs: Any) -> Any:
        if type(value) is _Sym and name in TYPE_TESTS and not args and not kwargs:
            return func("x")  # the answer for any str
        if _holds_sym(value) or any(_holds_sym(v) for v in (*args, *kwargs.values())):
            raise Unsupported
        return func(value, *args, **kwargs)

    guarded.__dict__.update(getattr(func, "__dict__", {}))
    return guarded


class _ShapeCodeGenerator(CodeGenerator):
    """jinja2's code generator with ``a in b`` / ``a not in b`` compiled to ``environment.shape_contains(a, b)``."""

    def visit_Compare(self, node: nodes.Compare, frame: Frame) -> None:
        if not any(op.op in ("in", "notin") for op in node.ops):
            super().visit_Compare(node, frame)
            return
        if len(node.ops) != 1:
            raise Unsupported
        op = node.ops[0]
        self.write("(not " if op.op == "notin" else "(")
        self.write("environment.shape_contains(")
        self.visit(node.expr, frame)
        self.write(", ")
        self.visit(op.expr, frame)
        self.write("))")


_ALLOWED_CALLABLES = (Namespace, safe_range, dict)


def shape_environment(base: Any) -> Any:
    """A copy of sandbox ``base`` (same options, filters, tests, globals) with the memo's guards."""
    cls = type(base)

    class ShapeSandbox(cls):  # type: ignore[misc, valid-type]
        code_generator_class = _ShapeCodeGenerator

        def getattr(self, obj: Any, attribute: str) -> Any:
            if type(obj) is _Sym:
                if attribute in ("startswith", "endswith"):
                    return obj.predicate(attribute)
                raise Unsupported
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            if type(obj) is _Sym or type(argument) is _Sym:
                raise Unsupported
            return super().getitem(obj, argument)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            if type(__obj) is _Observer:
                kwargs.pop("_loop_vars", None)
                kwargs.pop("_block_vars", None)
                if kwargs:
                    raise Unsupported
                return __obj(*args)
            allowed = (type(__obj) is types.BuiltinMethodType and type(getattr(__obj, "__self__", None))
                             in (str, list, dict, tuple)) or any(__obj is c for c in _ALLOWED_CALLABLES) or (
                type(__obj) is types.MethodType and type(__obj.__self__) is LoopContext)
            if not allowed or any(_holds_sym(a) for a in args) or any(
                    _holds_sym(v) for k, v in kwargs.items() if k not in ("_loop_vars", "_block_vars")):
                raise Unsupported
            return super().call(__context, __obj, *args, **kwargs)

        def shape_contains(self, item: Any, container: Any) -> bool:
            if type(container) is _Sym:
                return item in container  # _Sym.__contains__: observed (or refused)
            if isinstance(item, str) and _holds_sym(item) and isinstance(container, str):
                raise Unsupported  # a substring test of a content: not observable through the stand-in
            if _holds_sym(container) and not isinstance(container, list | tuple | dict):
                raise Unsupported
            return item in container

    env = ShapeSandbox(trim_blocks=base.trim_blocks, lstrip_blocks=base.lstrip_blocks,
                       extensions=[type(e) for e in base.extensions.values()])
    env.filters = {k: _guard_filter(k, f) for k, f in base.filters.items()}
    env.tests = {k: _guard_test(k, f) for k, f in base.tests.items()}
    env.globals.update(base.globals)
    return env


class ShapeMemo:
    """The memo for one compiled template (see the module docstring). Thread-safe."""

    def __init__(self, base_env: Any, source: str, variables: dict[str, str], literals: Iterable[str]) -> None:
        self.variables = dict(variables)
        self._lock = threading.Lock()
        self._entries: dict[tuple[bool, tuple[str, ...]], list[_Entry]] = {}
        self._failures: dict[tuple[bool, tuple[str, ...]], int] = {}
        self.bytes = 0  # estimated size of what the memo holds (at most MAX_MEMO_BYTES)
        self._template: Any = None
        self.reason = ""
        if any(SLOT in s for s in (*literals, *self.variables.values())):
            self.reason = "the template's text holds the slot mark"
            return
        env = shape_environment(base_env)
        try:
            ast = env.parse(source)
            refused = next((n for n in ast.find_all(REFUSED_NODES)), None) or next(
                (n for n in ast.find_all(nodes.For) if n.recursive), None)  # loop(...) returns rendered text
            if refused is not None:
                self.reason = f"the template uses {type(refused).__name__}"
                return
            self._template = env.from_string(source)
        except (Unsupported, Exception) as exc:  # noqa: BLE001 -- no memo for a template it cannot compile
            self.reason = f"cannot compile for the memo: {type(exc).__name__}"
            return
        self._env = env
        self._globals = dict(self._template.globals)

    @property
    def enabled(self) -> bool:
        return self._template is not None

    def render(self, conv: Conversation, add_generation_prompt: bool) -> str | None:
        """The template's output for a plain conversation (caller text needing no escaping), or None when the
        memo cannot give it (not plain, a new shape it cannot learn, a template it does not cover)."""
        if self._template is None:
            return None
        messages = conv.messages
        if conv.tools:
            return None
        for m in messages:
            if m.name is not None or m.tool_calls or m.tool_call_id is not None:
                return None
        contents = [m.content for m in messages]
        key = (add_generation_prompt, tuple(m.role for m in messages))
        entries = self._entries.get(key)
        if entries is not None:
            for entry in entries:
                out = entry.apply(contents)
                if out is not None:
                    return out
            if len(entries) >= MAX_ENTRIES_PER_SHAPE:
                return None
        elif self.bytes >= MAX_MEMO_BYTES:
            return None
        if self._failures.get(key, 0) >= MAX_FAILURES_PER_SHAPE:
            return None
        learnt = self._learn(conv, contents, add_generation_prompt)
        if learnt is None:  # a shape the template keeps refusing to the memo stops costing a second render
            with self._lock:
                known = key in self._failures
                cost = 0 if known else deep_size(key) + _FAILURE_BYTES
                if known or self.bytes + cost <= MAX_MEMO_BYTES:
                    self._failures[key] = self._failures.get(key, 0) + 1
                    self.bytes += cost
            return None
        with self._lock:
            cost = learnt.size() + (0 if key in self._entries else deep_size(key))
            if self.bytes + cost <= MAX_MEMO_BYTES:
                self._entries.setdefault(key, []).append(learnt)
                self.bytes += cost
        return learnt.apply(contents)

    def disable(self) -> None:
        """Render every conversation normally from now on (benchmarks compare with and without the memo)."""
        self._template = None
        self.reason = "disabled"

    def clear(self) -> None:
        """Forget every learnt shape."""
        with self._lock:
            self._entries.clear()
            self._failures.clear()
            self.bytes = 0

    def _learn(self, conv: Conversation, contents: list[str], add_generation_prompt: bool) -> _Entry | None:
        rec = _Recorder(contents)
        context = {**self.variables, "messages": [{"role": m.role, "content": rec.atom(i, ())}
                                                  for i, m in enumerate(conv.messages)],
                   "tools": None, "documents": None, "add_generation_prompt": add_generation_prompt}
        template = self._template
        try:
            ctx = new_context(self._env, template.name, template.blocks, {**self._globals, **context}, shared=True,
                              globals=self._globals)
            output = self._env.concat(template.root_render_func(ctx))
        except (Unsupported, Exception):  # noqa: BLE001 -- the real render decides (and raises what it raises)
            return None
        pieces = re.split(f"{SLOT}{rec.nonce}:(\\d+){SLOT}", output)
        literals = pieces[0::2]
        if any(SLOT in lit for lit in literals):
            return None
        slots = tuple(rec.slots[int(k)] for k in pieces[1::2])
        return _Entry(tuple(literals), slots, tuple(rec.observed))


class _Entry:
    """One learnt rendering of a shape: literal pieces, slots (message, transforms), the observations it needs."""

    __slots__ = ("literals", "slots", "observed")

    def __init__(self, literals: tuple[str, ...], slots: tuple[tuple[int, tuple[tuple[str, str | None], ...]], ...],
                 observed: tuple[tuple[int, tuple[tuple[str, str | None], ...], str, Any, Any], ...]) -> None:
        self.literals = literals
        self.slots = slots
        self.observed = observed

    def size(self) -> int:
        """Estimated bytes this entry keeps alive (:func:`deep_size`)."""
        return sys.getsizeof(self) + deep_size((self.literals, self.slots, self.observed))

    def apply(self, contents: list[str]) -> str | None:
        """The output for ``contents``, or None if one of the recorded observations comes out differently."""
        for index, transforms, op, arg, result in self.observed:
            if _OBSERVATIONS[op](_apply(contents[index], transforms), arg) != result:
                return None
        literals = self.literals
        out = [literals[0]]
        for (index, transforms), literal in zip(self.slots, literals[1:], strict=True):
            text = contents[index]
            for _op, chars in transforms:  # only "strip" is ever recorded
                text = text.strip(chars)
            out.append(text)
            out.append(literal)
        return "".join(out)
