"""Engine throughput benchmark: ours vs tiktoken, HF tokenizers, bpe-openai, quicktok (see bench/README.md)."""
