"""API routes, one module per concern; :data:`api_router` includes them all."""

from fastapi import APIRouter

from . import chat, compat, counting, health, price, tokenize, tokenizers

api_router = APIRouter()
api_router.include_router(tokenize.router)
api_router.include_router(tokenizers.router)
api_router.include_router(chat.router)
api_router.include_router(counting.router)
api_router.include_router(compat.router)
api_router.include_router(health.router)
api_router.include_router(price.router)
