"""The operations behind the routes: raw request bytes (or a few arguments) in, an
:class:`~app.api.ops.common.OpResult` (or a JSON-ready dict) out, so a route can run one in a worker thread.

:mod:`~app.api.ops.common` holds what the operations share (parsing, limits, the invalid-id 422, token pieces,
timing, truncation, the ``model`` block); each other module is one family of operations: :mod:`~app.api.ops.encode`
(``/encode``, ``/count``, ``/decode``), :mod:`~app.api.ops.chat` (``messages``, truncation of conversations,
``GET /models``), :mod:`~app.api.ops.chat_options` (chat-template options of the compatible routes),
:mod:`~app.api.ops.compat` (vLLM and TEI), :mod:`~app.api.ops.llamacpp`, :mod:`~app.api.ops.litellm`,
:mod:`~app.api.ops.counting` (OpenAI Responses and Anthropic counting), :mod:`~app.api.ops.price` (``POST /price``)
and :mod:`~app.api.ops.sample` (the ``sample`` option). This package re-exports nothing: import the module.
"""
