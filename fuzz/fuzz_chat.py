"""Robustness fuzz harness for the chat framings' JSON: hostile conversations (deep nesting in messages, tool
schemas, ``enum``/``default`` values and tool-call arguments; integers past 64 bits and past a double; odd types
where strings, lists or objects belong; regexes in ``pattern``) through :func:`parse_conversation` and every framing
(``count`` and ``frame``) of the bundled chat models.

The contract :func:`check` asserts: a conversation is either counted (and, where ids are public, its parts count
to the same number) or refused with :class:`~app.engine.chat.ChatInputError` -- never another exception
(``RecursionError``, ``OverflowError``, ``TypeError`` …) -- and a refusal's message stays short. A conversation is
built from the input bytes (:func:`conversation`), so the same harness runs under atheris (coverage-guided) or
from a seeded generator (:func:`run`, what the test suite calls)::

    python fuzz/fuzz_chat.py --seconds 5 --seed 1           # seeded run (the default: a few seconds)
    python fuzz/fuzz_chat.py -atheris -max_total_time=60     # coverage-guided (atheris)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

#: (framing spec, tokenizer) of the bundled chat models: one of each framing kind and template.
SPECS: tuple[tuple[dict[str, str], str], ...] = (
    ({"framing": "harmony"}, "o200k_harmony"),
    ({"framing": "jinja", "template": "qwen3-8b"}, "qwen3"),
    ({"framing": "jinja", "template": "llama-3.1-8b-instruct"}, "llama3"),
    ({"framing": "jinja", "template": "gemma-3-27b-it"}, "gemma3"),
    ({"framing": "mistral", "version": "v3"}, "mistral-v3"),
    ({"framing": "mistral", "version": "v7"}, "mistral-v7"),
    ({"framing": "openai-cookbook", "rules": "gpt-4o"}, "o200k_base"),
)
MAX_ERROR_CHARS = 600

_SCALARS: tuple[Any, ...] = (0, -1, 2**63, 2**64, -(2**63) - 1, 10**30, 10**400, 1.5, 1e300, float("inf"),
                             float("nan"), True, None, "", "x", "null", "<|start|>", "[INST]", "\ue000", "\ud800",
                             "a" * 300)
_PATTERNS = ("a{99999999999}", "(" * 300 + ")" * 300, "[", "^[a-z]+$", "(?<=a+)b", "x" * 1200, "(a|a)+$")


class _Bytes:
    """Choices drawn from the fuzzer's bytes (0 once they run out), or from a seeded ``random.Random``."""

    def __init__(self, data: bytes | None = None, rng: random.Random | None = None) -> None:
        self.data, self.pos, self.rng = data or b"", 0, rng

    def below(self, n: int) -> int:
        if self.rng is not None:
            return self.rng.randrange(n)
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1] % n

    def pick(self, items: tuple[Any, ...] | list[Any]) -> Any:
        return items[self.below(len(items))]


def _nested(src: _Bytes, depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if src.below(2) else {"k": value}
    return value


def _value(src: _Bytes) -> Any:
    """An odd JSON value: a scalar, or one nested 1-200 deep."""
    if src.below(3):
        return src.pick(_SCALARS)
    return _nested(src, src.pick((1, 8, 30, 63, 64, 65, 120, 200)), src.pick(_SCALARS))


def _schema(src: _Bytes, depth: int) -> Any:
    if depth <= 0 or src.below(4) == 0:
        leaf: dict[str, Any] = {"type": src.pick(("string", "integer", "number", "boolean", "object", "array",
                                                  ["string", "null"], 7))}
        for key in ("enum", "default", "pattern", "nullable", "description"):
            if src.below(4) == 0:
                leaf[key] = (src.pick(_PATTERNS) if key == "pattern" else [_value(src)] if key == "enum"
                             else _value(src))
        return leaf
    kind = src.below(3)
    if kind == 0:
        return {"type": "object", "properties": {"a": _schema(src, depth - 1), "b": {"type": "string"}},
                "required": src.pick((["a"], [], "a", None))}
    if kind == 1:
        return {"type": "array", "items": _schema(src, depth - 1)}
    return {"oneOf": [_schema(src, depth - 1), {"type": "null"}], "description": "v"}


def conversation(src: _Bytes) -> tuple[Any, Any]:
    """``(messages, tools)`` built from ``src``: a small conversation with one hostile feature or several."""
    args_choices = ("{}", '{"a": 1}', "[" * 70 + "]" * 70, "[" * 1000, '{"x": ' + "1" * 30 + "}", "not json",
                    json.dumps({"n": 2**64}), "{" + '"a":' * 5 + "1")
    call = {"id": src.pick(("abcdefghi", "x" * 2000, 7, None)), "type": "function",
            "function": {"name": src.pick(("get", "bad name", "f" * 100, 3)), "arguments": src.pick(args_choices)}}
    if src.below(4) == 0:
        call["function"]["arguments"] = _value(src)  # an object (or an odd type) instead of JSON text
    content = src.pick(("hi", "", None, ["x"], [{"type": "text", "text": "a"}], _value(src), 12))
    messages: list[Any] = [{"role": "user", "content": content}]
    if src.below(2):
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": src.pick(("abcdefghi", None, 5)), "content": "ok"},
                     {"role": "user", "content": "again"}]
    if src.below(5) == 0:
        messages.append(_value(src))
    tools: Any = None
    if src.below(3):
        params = _schema(src, src.pick((0, 2, 10, 31, 40, 100)))
        tools = [{"type": "function", "function": {"name": src.pick(("get", "f-1", "x" * 70)), "description": "d",
                                                   "parameters": params}}]
        if src.below(6) == 0:
            tools.append(_value(src))
    return messages, tools


@cache
def _framings() -> list[tuple[Any, Any]]:
    from app.engine import get_tokenizer
    from app.engine.chat import ChatFramings
    from app.engine.store import bundled_store_dir

    framings = ChatFramings.from_store(bundled_store_dir())
    out = []
    for spec, tok in SPECS:
        tokenizer = get_tokenizer(tok)
        out.append((framings.framing(spec, tokenizer), tokenizer))
    return out


def check_conversation(messages: Any, tools: Any) -> None:
    """The contract of the module docstring for one conversation; raises ``AssertionError`` when it is broken."""
    from app.engine.chat import ChatInputError, parse_conversation

    try:
        conv = parse_conversation(messages, tools)
    except ChatInputError as exc:
        assert len(str(exc)) <= MAX_ERROR_CHARS, f"refusal of {len(str(exc))} characters"
        return
    for framing, enc in _framings():
        try:
            n = framing.count(enc, conv, add_generation_prompt=True)
            if framing.ids_public:
                parts = list(framing.frame(conv, add_generation_prompt=True))
                assert len(enc.encode_parts(parts)) == n, f"{framing.kind}: count and ids differ"
        except ChatInputError as exc:
            assert len(str(exc)) <= MAX_ERROR_CHARS, f"{framing.kind}: refusal of {len(str(exc))} characters"
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 -- any other exception is the finding
            raise AssertionError(f"{framing.kind}: {type(exc).__name__}: {str(exc)[:200]}") from exc


def check(data: bytes) -> None:
    """atheris entry point: one conversation from ``data``."""
    check_conversation(*conversation(_Bytes(data)))


def run(seed: int = 1, seconds: float = 3.0, limit: int | None = None) -> int:
    """Seeded conversations through :func:`check_conversation` for ``seconds`` (or ``limit`` cases); returns the
    number checked."""
    _framings()  # loading the tokenizers is not part of the run's time
    rng = random.Random(seed)
    src = _Bytes(rng=rng)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end and (limit is None or n < limit):
        check_conversation(*conversation(src))
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("-atheris", action="store_true", help="coverage-guided run (other arguments: libFuzzer's)")
    args, rest = parser.parse_known_args()
    if args.atheris:
        import atheris

        with atheris.instrument_imports(include=["app"]):
            _framings()
        atheris.Setup([sys.argv[0], *rest], check)
        atheris.Fuzz()
        return
    n = run(args.seed, args.seconds)
    print(f"{n} conversations, no contract broken")


if __name__ == "__main__":
    main()
