"""Pipeline models: turn one pre-tokenized piece into token ids (see :class:`app.engine.pipeline.base.Model`)."""
