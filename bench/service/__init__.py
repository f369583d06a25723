"""HTTP service benchmark: this service next to a plain FastAPI + tiktoken service (see ``run.py``)."""
