"""Reference renderer: ``transformers``' ``apply_chat_template``, run as a script in a separate Python that has
transformers (see ``scripts/chat_reference_env.sh``; the project's pinned ``regex`` rules out installing a
transformers in the service's own environment). Imports nothing from the project.

stdin: ``{"tokenizer_dir", "chat_template", "items": [{"messages", "tools", "add_generation_prompt",
"parts": [[kind, value], ...] | null, "kwargs": {...}}]}`` where ``kind`` is ``"text"`` or ``"special"`` and the
optional ``kwargs`` are more ``apply_chat_template`` arguments (``enable_thinking``, ``continue_final_message``).
stdout: ``[{"rendered", "ids", "parts_ids" | null} | {"error": str}]``: ``ids`` tokenizes the rendered string as
``apply_chat_template(tokenize=True)`` does; ``parts_ids`` encodes the given parts with special-token strings in text
parts not parsed (``split_special_tokens``), for conversations whose caller text holds role markers.
"""

from __future__ import annotations

import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def main() -> None:
    from transformers import AutoTokenizer

    job = json.load(sys.stdin)
    tok = AutoTokenizer.from_pretrained(job["tokenizer_dir"])
    out = []
    for item in job["items"]:
        try:
            kwargs = dict(tools=item["tools"], chat_template=job["chat_template"],
                          add_generation_prompt=item["add_generation_prompt"])
            kwargs.update(item.get("kwargs") or {})  # chat_template_kwargs, continue_final_message
            rendered = tok.apply_chat_template(item["messages"], tokenize=False, **kwargs)
            ids = tok(rendered, add_special_tokens=False)["input_ids"]
            parts_ids = None
            if item.get("parts") is not None:
                parts_ids = []
                for kind, value in item["parts"]:
                    if kind == "special":
                        parts_ids.append(tok.convert_tokens_to_ids(value))
                    else:
                        parts_ids.extend(tok(value, add_special_tokens=False, split_special_tokens=True)["input_ids"])
            out.append({"rendered": rendered, "ids": ids, "parts_ids": parts_ids})
        except Exception as exc:  # the template refused the conversation: report it, compare refusals
            out.append({"error": f"{type(exc).__name__}: {exc}"})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
