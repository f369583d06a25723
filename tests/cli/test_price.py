"""``python -m app price``, run as a real process: usage flags, a provider response on stdin, errors (exit 2)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import genai_prices
from genai_prices import Usage

from tests.pricing.test_data import ACME

from .test_tokenize import run


def test_price_from_flags() -> None:
    out = run("price", "claude-sonnet-4-5", "--input-tokens", "300000", "--cache-read-tokens", "1000",
              "--cache-write-tokens", "500", "--cache-write-1h-tokens", "500", "--output-tokens", "200", "--json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    want = genai_prices.calc_price(Usage(input_tokens=300000, cache_read_tokens=1000, cache_write_tokens=500,
                                         cache_write_1h_tokens=500, output_tokens=200), "claude-sonnet-4-5")
    assert Decimal(body["total"]) == want.total_price and body["tier"]["applied"] == 200000
    human = run("price", "gpt-4o", "--input-tokens", "1000", "--output-tokens", "100", "--service-tier", "batch")
    assert human.returncode == 0, human.stderr
    assert human.stdout.splitlines()[0] == "0.00175 USD  openai gpt-4o (genai-prices 0.2.3 (bundled))"
    assert "service tier: batch" in human.stdout


def test_price_from_a_response_on_stdin() -> None:
    response = {"model": "gpt-4o", "usage": {"prompt_tokens": 1000, "completion_tokens": 50}}
    out = run("price", "--response", "--provider", "openai", "--json", stdin=json.dumps(response))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["total"] == "0.003"


def test_price_data_file_from_the_environment(tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(ACME))
    out = run("price", "acme-1", "--input-tokens", "10", "--json", env={"TOKENIZER_PRICE_DATA_FILE": str(data)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["price_data"]["source"] == "file"


def test_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("nope")
    for args, stdin, env, needle in (
        (("price", "claude-sonet-4", "--input-tokens", "1"), "", None, "claude-sonnet-4"),
        (("price", "gpt-4o"), "", None, "usage flags"),
        (("price", "--response", "--provider", "openai"), "{not json", None, "not JSON"),
        (("price", "--response"), "{}", None, "--provider"),
        (("price", "gpt-4o", "--usage", "bogus=1"), "", None, "KEY=N"),
        (("price", "gpt-4o", "--input-tokens", "1", "--timestamp", "yesterday"), "", None, "ISO 8601"),
        (("price", "gpt-4o", "--input-tokens", "1", "--service-tier", "flex"), "", None, "flex"),
        (("price", "claude-sonnet-4-5", "--input-tokens", "9", "--cache-write-1h-tokens", "1"), "", None,
         "require explicit cache_write_tokens"),
        (("price", "gpt-4o", "--input-tokens", "1"), "", {"TOKENIZER_PRICE_DATA_FILE": str(bad)}, "bad.json"),
    ):
        out = run(*args, stdin=stdin, env=env)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], (args, out.stderr)
