"""The compiled extensions, built by ``setup.py`` when a C compiler is available: ``_core`` (``tokcore.c``, the
encoding hot path) and ``_trainer`` (``trainer.c``, the trainer's pre-token counter and merge learner). Each is
optional and imported on its own by :mod:`app.engine.native` and :mod:`app.engine.training.compiled`, which fall
back to the pure-Python reference when it is missing."""
