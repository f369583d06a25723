"""Content-format detection (vLLM's rule, ``vllm/entrypoints/chat_utils.py``): which templates loop over message
content and so receive list content as parts."""

from __future__ import annotations

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.chat import load_templates
from app.engine.chat.content_format import OPENAI, STRING, detect
from app.engine.store import bundled_store_dir


def fmt(source: str) -> str:
    return detect(ImmutableSandboxedEnvironment().parse(source))


@pytest.mark.parametrize("source", [
    "{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}",
    "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}",
    "{% for m in messages %}{% for p in m.content | selectattr('type', 'eq', 'text') %}{% endfor %}{% endfor %}",
    "{% for m in messages %}{% for p in m['content'][1:] %}{% endfor %}{% endfor %}",
    "{% set rest = messages[1:] %}{% for m in rest %}{% for p in m['content'] %}{% endfor %}{% endfor %}",
    "{% set a = messages %}{% set b = a | reverse %}{% for m in b %}{% for p in m.content %}{% endfor %}{% endfor %}",
    "{% for m in messages[::-1] %}{% if m.content is string %}{{ m.content }}{% else %}"
    "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}",
])
def test_loops_over_content(source: str) -> None:
    assert fmt(source) == OPENAI


@pytest.mark.parametrize("source", [
    "{% for m in messages %}{{ m['content'] | trim }}{% endfor %}",
    "{% for m in messages %}{% for c in m['content'].split('x') %}{% endfor %}{% endfor %}",  # a method call
    "{% for m in messages %}{% for p in m['parts'] %}{% endfor %}{% endfor %}",  # another field
    "{% for p in messages[0]['content'] %}{% endfor %}",  # not through a message loop variable
    "{% for m in other %}{% for p in m.content %}{% endfor %}{% endfor %}",  # not the conversation
    "{% for i, m in messages | enumerate %}{% for p in m.content %}{% endfor %}{% endfor %}",  # unreadable: string
    "{% for m in messages %}{% for a, b in m.content %}{% endfor %}{% endfor %}",
    "plain text",
])
def test_takes_strings(source: str) -> None:
    assert fmt(source) == STRING


def test_bundled_templates() -> None:
    found = {name: fmt(src.text) for name, src in load_templates(bundled_store_dir()).items()}
    assert found == {"gemma-3-27b-it": OPENAI, "qwen3-8b": STRING, "llama-3.1-8b-instruct": STRING}
