"""Licence and notice files for the bundled tokenizer artifacts (``tokenizers_store/``).

Contract checked here: every manifest entry names a licence file that exists and is non-trivial, every licence file
in ``licenses/`` is referenced, and ``tokenizers_store/NOTICE`` carries the attribution the Meta Llama 3 Community
License requires plus one provenance line per bundled artifact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parent.parent / "tokenizers_store"
MANIFEST = json.loads((STORE / "manifest.json").read_text(encoding="utf-8"))
ENTRIES = MANIFEST["tokenizers"]

#: Section 1.b.iii of the Meta Llama 3 Community License: this exact sentence must be in a "Notice" text file.
LLAMA3_NOTICE = (
    "Meta Llama 3 is licensed under the Meta Llama 3 Community License, "
    "Copyright © Meta Platforms, Inc. All Rights Reserved."
)

#: Section 3.1 of the Gemma Terms of Use: this notice must accompany every copy that is redistributed.
GEMMA_NOTICE = "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"

MIT_GRANT = "Permission is hereby granted, free of charge, to any person obtaining a copy"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_manifest_license_file_exists(entry: dict) -> None:
    rel = entry.get("license_file")
    assert rel, f"{entry['name']}: manifest entry has no license_file"
    path = (STORE / rel).resolve()
    assert path.is_relative_to(STORE / "licenses"), f"{entry['name']}: {rel} is outside tokenizers_store/licenses"
    assert path.is_file(), f"{entry['name']}: licence file {rel} is missing"
    assert path.stat().st_size > 500, f"{entry['name']}: licence file {rel} looks truncated"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_license_text_matches_declared_license(entry: dict) -> None:
    text = (STORE / entry["license_file"]).read_text(encoding="utf-8")
    if entry["license"] == "MIT":
        assert "MIT License" in text and MIT_GRANT in text
        assert "Copyright (c)" in text
    elif entry["license"] == "Apache-2.0":
        assert "Apache License" in text and "Version 2.0, January 2004" in text
        assert "END OF TERMS AND CONDITIONS" in text
    elif entry["license"] == "DeepSeek License Agreement":
        assert text.startswith("DEEPSEEK LICENSE AGREEMENT") and "Attachment A" in text
    elif entry["license"] == "Gemma Terms of Use":
        assert "ai.google.dev/gemma/terms" in text and GEMMA_NOTICE in text
    elif entry["license"] == "Llama 3 Community License":
        assert text.startswith("META LLAMA 3 COMMUNITY LICENSE AGREEMENT")
        assert LLAMA3_NOTICE in text  # the licence itself quotes the required notice
    else:
        pytest.fail(f"{entry['name']}: no check for licence {entry['license']!r}; add one")


def test_every_licence_file_is_referenced() -> None:
    referenced = {Path(e["license_file"]).name for e in ENTRIES}
    present = {p.name for p in (STORE / "licenses").iterdir() if p.is_file()}
    assert present == referenced


def test_notice_has_llama3_attribution() -> None:
    notice = (STORE / "NOTICE").read_text(encoding="utf-8")
    assert LLAMA3_NOTICE in notice


def test_notice_has_gemma_attribution() -> None:
    notice = (STORE / "NOTICE").read_text(encoding="utf-8")
    assert GEMMA_NOTICE in notice


def test_notice_has_one_provenance_line_per_artifact() -> None:
    lines = (STORE / "NOTICE").read_text(encoding="utf-8").splitlines()
    artifacts = {e["artifact"] for e in ENTRIES}
    assert artifacts == {p.name for p in STORE.glob("*.tiktoken")} | {p.name for p in STORE.glob("*.xz")}
    for artifact in sorted(artifacts):
        matching = [ln for ln in lines if ln.startswith(f"{artifact}: ")]
        assert len(matching) == 1, f"NOTICE needs exactly one provenance line for {artifact}"
        licence_files = {e["license_file"] for e in ENTRIES if e["artifact"] == artifact}
        for rel in licence_files:
            assert rel in matching[0], f"NOTICE line for {artifact} does not name {rel}"
