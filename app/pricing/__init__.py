"""Prices from genai-prices: the data in force (:mod:`.data`), exact money (:mod:`.money`), quotes line by line
(:mod:`.quote`), request-level lookups (:mod:`.pricer`), OpenAI model -> tiktoken encoding (:mod:`.openai_models`)
and the ``model`` block of /count and /encode (:mod:`.estimate`). The engine never imports this package."""
