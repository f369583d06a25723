"""Pipeline tokenizers: normalizer -> pre-tokenizer -> model -> post-processor, and a decoder back.

See :mod:`app.engine.pipeline.base` for the component protocols and the offset rules.
"""
