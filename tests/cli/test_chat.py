"""``count --model`` and ``count --messages FILE.json``, run as a real process."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from app.engine import get_tokenizer
from tests.engine.chat.test_cookbook import EXAMPLE_MESSAGES, TOOL_EXAMPLE_MESSAGES, TOOL_EXAMPLE_TOOLS

from .test_tokenize import run


def test_count_with_model_prints_window_and_cost() -> None:
    text = "How many tokens is this?"
    out = run("count", "--model", "gpt-4o-2024-08-06", "--max-output-tokens", "100", "--json", stdin=text)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    n = get_tokenizer("o200k_base").count(text)
    assert body["count"] == n and body["tokenizer"] == "o200k_base" and body["context_window"] == 128000
    # genai-prices matches the snapshot name to gpt-4o: $2.5 / $10 per million tokens, exact decimal strings
    assert Decimal(body["estimated_input_cost"]) == n * Decimal("2.5") / 1_000_000
    assert body["estimated_output_cost"] == "0.001" and body["price_source"] == "genai-prices: openai gpt-4o"
    # gpt-4's table entry allows 8,192 output tokens in an 8,192-token window: reserving them never fits
    human = run("count", "--model", "gpt-4", stdin=text)
    assert human.returncode == 0 and human.stdout.startswith(f"{get_tokenizer('cl100k_base').count(text)} tokens")
    assert "context window 8192: does NOT fit with 8192 output tokens reserved" in human.stdout
    assert "worst-case output" in human.stdout
    small = run("count", "--model", "gpt-4", "--max-output-tokens", "100", stdin=text)
    assert "context window 8192: fits with 100 output tokens reserved" in small.stdout


def test_count_with_models_only_the_price_data_knows() -> None:
    text = "How many tokens is this?"
    gpt5 = run("count", "--model", "gpt-5", "--max-output-tokens", "10", "--json", stdin=text)
    assert gpt5.returncode == 0, gpt5.stderr
    body = json.loads(gpt5.stdout)
    assert body["tokenizer"] == "o200k_base" and body["count"] == get_tokenizer("o200k_base").count(text)
    assert body["price_source"] == "genai-prices: openai gpt-5" and body["context_window"] == 400000
    claude = run("count", "--model", "claude-sonnet-4-5", stdin=text)
    assert claude.returncode == 2 and claude.stderr.count("\n") == 1
    assert "no public tokenizer" in claude.stderr and "/v1/messages/count_tokens" in claude.stderr


def test_count_messages(tmp_path: Path) -> None:
    f = tmp_path / "conv.json"
    f.write_text(json.dumps(EXAMPLE_MESSAGES))
    out = run("count", "--model", "gpt-4o", "--messages", str(f), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["count"] == 124
    g = tmp_path / "tools.json"
    g.write_text(json.dumps({"messages": TOOL_EXAMPLE_MESSAGES, "tools": TOOL_EXAMPLE_TOOLS}))
    assert json.loads(run("count", "--model", "gpt-4", "--messages", str(g), "--json").stdout)["count"] == 105
    harmony = run("count", "--model", "gpt-oss-20b", "--messages", str(g), "--json")
    assert json.loads(harmony.stdout)["framing"] == "harmony"


def test_count_messages_errors(tmp_path: Path) -> None:
    f = tmp_path / "conv.json"
    f.write_text(json.dumps([{"role": "user", "content": "x"}]))
    for args, needle in [(("--model", "gpt2", "--messages", str(f)), "has no chat framing"),
                         (("--messages", str(f)), "needs --model"),
                         (("--model", "nope-1", "--messages", str(f)), "unknown model"),
                         (("--model", "gpt-4o", "--messages", str(tmp_path / "missing.json")), "cannot read")]:
        out = run("count", *args)
        assert out.returncode == 2 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    f.write_text(json.dumps([{"role": "wizard", "content": "x"}]))
    out = run("count", "--model", "gpt-4o", "--messages", str(f))
    assert out.returncode == 2 and "messages[0].role" in out.stderr and "Traceback" not in out.stderr
