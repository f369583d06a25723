"""The HTTP service: FastAPI app factory (:func:`app.api.main.create_app`), routes, schemas, errors, metrics."""
