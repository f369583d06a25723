"""Prices from genai-prices: the data in force and its provenance (:mod:`.data`), exact money (:mod:`.money`),
quotes line by line (:mod:`.quote`), lookups, service tiers and usage extraction (:mod:`.pricer`), and OpenAI
model -> tiktoken encoding (:mod:`.openai_models`). The ``model`` block of /count and /encode is
:mod:`app.core.billing`. The engine never imports this package."""
