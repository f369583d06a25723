"""The enum values of SentencePiece's ``ModelProto`` that both the ``.model`` loader
(:mod:`app.engine.pipeline.sentencepiece`) and the SentencePiece-style trainers use; a module of its own so that
training does not import the loader and the pipeline behind it."""

#: ``ModelProto.SentencePiece.Type`` values.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
#: ``TrainerSpec.ModelType`` values the loader builds and the trainers write.
UNIGRAM, BPE = 1, 2
