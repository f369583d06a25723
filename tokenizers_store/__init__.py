"""The bundled tokenizer store: frozen artifacts, ``manifest.json`` and ``models.json`` (data only)."""
