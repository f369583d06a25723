"""The framework's floor: a FastAPI route that reads the body and returns a constant.

Nothing of this service runs in it (no gateway, no validation, no tokenization, no metrics), so its requests/s is
the most any FastAPI app can answer on this machine; ``bench.service.floor`` reports this service as a fraction of
it, served two ways. The stock floor (the one a user compares with) is this app on the stock uvicorn CLI, with its
default protocol classes (uvloop and httptools when installed):

    python -m uvicorn bench.service.floor_app:app --port 8001 --workers 2 --no-access-log

The same-protocol floor is this app started with the same uvicorn options as ``python -m app serve``
(:func:`app.cli.prefork.uvicorn_options`: uvloop, our httptools protocol with its header limits, no server header,
access log off):

    python -m bench.service.floor_app --port 8001 --workers 2
"""

from __future__ import annotations

import argparse

from fastapi import FastAPI, Request
from fastapi.responses import Response

app = FastAPI(title="floor")
ANSWER = b'{"tokenizer":"cl100k_base","count":42}'


@app.post("/count")
@app.post("/encode")
async def constant(request: Request) -> Response:
    await request.body()
    return Response(ANSWER, media_type="application/json")


@app.get("/healthz")
async def healthz() -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from app.cli.prefork import uvicorn_options
    from app.core.config import Settings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    settings = Settings(host=args.host, port=args.port, workers=args.workers, access_log=False, log_level="warning")
    uvicorn.run("bench.service.floor_app:app", **uvicorn_options(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
