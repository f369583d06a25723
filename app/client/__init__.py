"""A Python client for the tokenizer service: typed calls, pooled connections, retries, typed errors.

    from app.client import Client, RemoteEncoding

    with Client("http://127.0.0.1:8000", token=os.environ.get("TOKENIZER_AUTH_TOKEN")) as client:
        client.count("hello world", tokenizer="cl100k_base").count        # 2
        client.encode("hi", model="gpt-4o", suffix=["<|endoftext|>"]).ids
        client.price("gpt-4o", usage={"input_tokens": 1000, "output_tokens": 100}).total  # Decimal('0.0035')
        enc = RemoteEncoding(client, "cl100k_base")                        # tiktoken-shaped
        enc.encode("hello <|endoftext|>", allowed_special="all")

``Client(uds="/run/tokenizer.sock")`` talks over a Unix socket; :class:`AsyncClient` has the same methods as
coroutines. This package imports neither the engine nor the web layer.
"""

from __future__ import annotations

from .aio import AsyncClient
from .calls import Retry
from .errors import (
    AuthenticationError,
    BadRequestError,
    ClientError,
    ConnectionFailedError,
    InternalServerError,
    InvalidTextError,
    InvalidTokenIdError,
    MethodNotAllowedError,
    NotFoundError,
    NotReadyError,
    PayloadTooLargeError,
    RequestTimeoutError,
    RequestValidationError,
    ServerTimeoutError,
    ServiceError,
    UnknownModelError,
    UnknownSpecialTokenError,
    UnknownTokenizerError,
    UnsupportedMediaTypeError,
)
from .remote import AsyncRemoteEncoding, RemoteEncoding
from .results import (
    CountBatchResult,
    CountResult,
    DecodeBatchResult,
    DecodeResult,
    EncodeBatchResult,
    Encoded,
    EncodeResult,
    Health,
    ModelEntry,
    ModelUsage,
    PriceLine,
    PriceResult,
    Ready,
    TokenizerDetail,
    TokenizerInfo,
    TokenPiece,
)
from .sync import Client

__all__ = [
    "AsyncClient",
    "AsyncRemoteEncoding",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ClientError",
    "ConnectionFailedError",
    "CountBatchResult",
    "CountResult",
    "DecodeBatchResult",
    "DecodeResult",
    "EncodeBatchResult",
    "EncodeResult",
    "Encoded",
    "Health",
    "InternalServerError",
    "InvalidTextError",
    "InvalidTokenIdError",
    "MethodNotAllowedError",
    "ModelEntry",
    "ModelUsage",
    "PriceLine",
    "PriceResult",
    "NotFoundError",
    "NotReadyError",
    "PayloadTooLargeError",
    "Ready",
    "RemoteEncoding",
    "RequestTimeoutError",
    "RequestValidationError",
    "Retry",
    "ServerTimeoutError",
    "ServiceError",
    "TokenPiece",
    "TokenizerDetail",
    "TokenizerInfo",
    "UnknownModelError",
    "UnknownSpecialTokenError",
    "UnknownTokenizerError",
    "UnsupportedMediaTypeError",
]
