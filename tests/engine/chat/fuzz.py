"""The chat-counting fuzz campaign (not collected by pytest): the seeded conversation shapes of
:mod:`.conversations` with every caller text replaced by strings of the exactness grammar
(:mod:`tests.engine.exactness.grammar`) and, in a third of them, role markers and the model's own special-token
strings typed into the text, which must be counted as plain text. Compared with the references the chat tests use:

* ``cookbook``: the OpenAI cookbook's published counting functions on tiktoken (``gpt-4o``/o200k_base,
  ``gpt-4``/cl100k_base), for the conversations those functions can run on;
* ``harmony``: ``openai-harmony``'s rendering over the store's o200k vocabulary (ids and the framing's count);
* ``jinja``: transformers' ``apply_chat_template`` in its own Python (``scripts/chat_reference_env.sh``) for
  Llama 3.1 (llama3), Qwen3 and Gemma 3: rendered text, ids (``split_special_tokens`` ids when caller text holds
  any added token of either tokenizer.json) and the framing's count. Where transformers' ids differ from ours
  but ours equal the tokenizer library's on the same parts (Hugging Face ``tokenizers`` / tiktoken, what the
  exactness suites compare with), the case is kept apart as a disagreement between the two references.

Ours is run on the compiled and the pure-Python backends.

    python -m tests.engine.chat.fuzz [--framings cookbook,harmony,jinja] [--seconds S] [--seed N] [--batch B]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from app.engine import get_tokenizer
from app.engine.chat import ChatInputError, parse_conversation
from app.engine.chat.cookbook import RULES, count_conversation
from app.engine.chat.framings import HarmonyFraming, TemplateFraming
from app.engine.chat.harmony import frame as harmony_frame
from app.engine.store import bundled_store_dir
from tests.engine.exactness import grammar

from .conversations import MARKERS, conversation, has_markers, parts_conversation

BACKENDS = ("native", "python")
FRAMINGS = ("cookbook", "harmony", "jinja")
STYLE = {"cookbook": "openai", "harmony": "harmony"}


def content(rng: random.Random, markers: list[str]) -> str:
    """A grammar string, with role markers / special-token strings typed in at random places when ``markers``."""
    s = grammar.text(rng) if rng.random() < 0.97 else ""
    for _ in range(rng.randint(1, 4) if markers else 0):
        i = rng.randint(0, len(s))
        s = s[:i] + rng.choice(markers) + s[i:]
    return s


def fuzz_conversation(rng: random.Random, style: str, specials: list[str]) -> dict[str, Any]:
    """One conversation of ``style``'s shape whose every caller text (contents, text parts, tool results) is
    grammar text; tool-call arguments stay JSON. For the framings with ids, half are list-content conversations with
    names on every role (:func:`.conversations.parts_conversation`)."""
    c = parts_conversation(rng, style) if style != "openai" and rng.random() < 0.5 else conversation(rng, style)
    pool = MARKERS + specials if rng.random() < 0.35 else []
    for m in c["messages"]:
        if isinstance(m.get("content"), str):
            m["content"] = content(rng, pool)
        elif isinstance(m.get("content"), list):
            for part in m["content"]:
                part["text"] = content(rng, pool)
    return c


class Tally:
    def __init__(self) -> None:
        self.compared: dict[str, int] = {}
        self.mismatches: list[dict[str, Any]] = []
        self.disagreements: list[dict[str, Any]] = []

    def add(self, key: str, ok: bool, detail: dict[str, Any]) -> None:
        self.compared[key] = self.compared.get(key, 0) + 1
        if not ok:
            self.mismatches.append({"target": key, **detail})
            print(f"MISMATCH {key}: {json.dumps(detail, ensure_ascii=False)[:600]}", flush=True)

    def disagree(self, key: str, detail: dict[str, Any]) -> None:
        """Ours equals the tokenizer library but not transformers: counted as compared, kept apart as evidence."""
        self.compared[key] = self.compared.get(key, 0) + 1
        self.disagreements.append({"target": key, **detail})


def fuzz_cookbook(rng: random.Random, tally: Tally, n: int) -> None:
    from harness.references import reference_encoding

    from .test_cookbook import TOKENIZER, _cookbook_shaped, _TextOnly, cookbook_messages, cookbook_tools

    for rules, name in TOKENIZER.items():
        ref = _TextOnly(reference_encoding(name))
        encs = {b: get_tokenizer(name, backend=b) for b in BACKENDS}
        for _ in range(n):
            c = fuzz_conversation(rng, "openai", [])
            if not _cookbook_shaped(c):
                continue
            want = cookbook_messages(ref, c["messages"]) + cookbook_tools(ref, c["tools"] or [],
                                                                          RULES[rules].func_init)
            conv = parse_conversation(c["messages"], c["tools"])
            for b, tokenizer in encs.items():
                got = count_conversation(tokenizer.count, conv, RULES[rules])
                tally.add(f"cookbook {rules}/{b}", got == want, {"ours": got, "reference": want, "conv": c})


class Harmony:
    """``openai-harmony`` reading a temporary copy of the store's o200k vocabulary (no network)."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="harmony-vocab-")
        shutil.copy(bundled_store_dir() / "o200k_base.tiktoken", os.path.join(self._dir, "o200k_base.tiktoken"))
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = self._dir
        import openai_harmony as oh

        self.oh = oh
        self.encoding = oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


def fuzz_harmony(rng: random.Random, tally: Tally, n: int, ref: Harmony) -> None:
    from .test_harmony import reference_messages

    oh = ref.oh
    encs = {b: get_tokenizer("o200k_harmony", backend=b) for b in BACKENDS}
    framing = HarmonyFraming()
    for _ in range(n):
        c = fuzz_conversation(rng, "harmony", [])
        conv = parse_conversation(c["messages"], c["tools"])
        agp = c["add_generation_prompt"]
        try:
            parts = list(harmony_frame(conv, add_generation_prompt=agp))
        except ChatInputError:
            continue  # refused (a tool result with no call): the chat tests check refusals
        convo = oh.Conversation.from_messages(reference_messages(oh, conv))
        want = (ref.encoding.render_conversation_for_completion(convo, oh.Role.ASSISTANT) if agp
                else ref.encoding.render_conversation(convo))
        for b, tokenizer in encs.items():
            ids = tokenizer.encode_parts(parts)
            count = framing.count(tokenizer, conv, add_generation_prompt=agp)
            tally.add(f"harmony/{b}", ids == want and count == len(want),
                      {"ids_equal": ids == want, "count": count, "reference_len": len(want), "conv": c})


def reference_added_tokens(name: str) -> set[str]:
    """Every added token of the reference's own tokenizer.json for template ``name`` (special or not): caller text
    holding one is compared with the reference's ``split_special_tokens`` ids of the parts."""
    from . import hf

    path = hf.reference_dir() / "models" / hf.MODEL_DIRS[name] / "tokenizer.json"
    return {a["content"] for a in json.loads(path.read_text(encoding="utf-8"))["added_tokens"]}


def library_ids(tokenizer: str, parts: Any) -> list[int]:
    """The ids of ``parts`` by the tokenizer library our exactness suites compare with (Hugging Face
    ``tokenizers`` with special matching off, tiktoken ``encode_ordinary`` for llama3), specials by their ids."""
    from app.engine.specials import Special

    enc = get_tokenizer(tokenizer)
    if tokenizer == "llama3":
        from harness.references import reference_encoding

        ref = reference_encoding("llama3").encode_ordinary
    else:
        from tests.engine.pipeline.reference import reference

        hf_tok = reference(tokenizer)

        def ref(text: str) -> list[int]:
            ids: list[int] = hf_tok.encode(text, add_special_tokens=False).ids
            return ids
    out: list[int] = []
    for p in parts:
        out += enc.encode_parts([p]) if isinstance(p, Special) else ref(p)
    return out


def fuzz_jinja(rng: random.Random, tally: Tally, n: int) -> None:
    from . import hf
    from .test_jinja import STYLES, TEMPLATES, TOKENIZERS, ours_and_items, specials_of, template

    if not hf.available():
        print(f"jinja: transformers reference not built ({hf.reference_dir()}); skipped", flush=True)
        return
    for name, style in STYLES.items():
        specials = specials_of(name)
        convs = [fuzz_conversation(rng, style, specials[:60]) for _ in range(n)]
        ours, items = ours_and_items(name, convs)
        answers = hf.run(name, TEMPLATES[name].text, items)
        framing = TemplateFraming(template(name))
        encs = {b: get_tokenizer(TOKENIZERS[name], backend=b) for b in BACKENDS}
        marker_set = set(specials) | reference_added_tokens(name)
        for c, mine, ref in zip(convs, ours, answers, strict=True):
            if isinstance(mine, ChatInputError) or "error" in ref:
                both = isinstance(mine, ChatInputError) and "error" in ref
                tally.add(f"jinja {name} refusals", both, {"ours": str(mine)[:200], "reference": ref.get("error"),
                                                            "conv": c})
                continue
            rendered, parts = mine
            if rendered != ref["rendered"] or parts.rendered() != ref["rendered"]:
                tally.add(f"jinja {name} rendered", False, {"conv": c})
                continue
            want = ref["parts_ids"] if has_markers(c, marker_set) else ref["ids"]
            conv = parse_conversation(c["messages"], c["tools"])
            for b, tokenizer in encs.items():
                ids = tokenizer.encode_parts(list(parts))
                count = framing.count(tokenizer, conv, add_generation_prompt=c["add_generation_prompt"])
                ok = ids == want and count == len(want)
                if not ok and count == len(ids) and ids == library_ids(TOKENIZERS[name], parts):
                    # transformers and the tokenizer library disagree on these parts; ours is the library's
                    tally.disagree(f"jinja {name}/{b}", {"ours": ids, "transformers": want, "conv": c})
                    continue
                tally.add(f"jinja {name}/{b}", ok,
                          {"ids_equal": ids == want, "count": count, "reference_len": len(want), "conv": c})


def run(framings: list[str], seconds: float, seed: int, batch: int) -> Tally:
    """Fuzz the ``framings`` in rounds of ``batch`` conversations each until ``seconds`` have passed."""
    rng = random.Random(seed)
    tally = Tally()
    harmony_ref = Harmony() if "harmony" in framings else None
    steps: dict[str, Callable[[], None]] = {
        "cookbook": lambda: fuzz_cookbook(rng, tally, batch),
        "harmony": lambda: fuzz_harmony(rng, tally, batch, harmony_ref),  # type: ignore[arg-type]
        "jinja": lambda: fuzz_jinja(rng, tally, batch),
    }
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for f in framings:
                steps[f]()
    finally:
        if harmony_ref is not None:
            harmony_ref.close()
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--framings", default=",".join(FRAMINGS))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--report", default="")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    tally = run([f for f in args.framings.split(",") if f], args.seconds, args.seed, args.batch)
    for key in sorted(tally.compared):
        bad = sum(m["target"] == key for m in tally.mismatches)
        apart = sum(m["target"] == key for m in tally.disagreements)
        print(f"{key:40s} conversations {tally.compared[key]:>7,d}  mismatches {bad}"
              + (f"  (transformers != tokenizers library, ours == library: {apart})" if apart else ""))
    print(f"seed {args.seed}, {time.monotonic() - t0:.0f} s, {len(tally.mismatches)} mismatches")
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            json.dump({"seed": args.seed, "compared": tally.compared, "mismatches": tally.mismatches,
                       "disagreements": tally.disagreements}, fh,
                      ensure_ascii=False, indent=1)
    return 1 if tally.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
