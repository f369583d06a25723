"""Pipeline models: one module per algorithm (BPE over merges, WordLevel; WordPiece and Unigram alongside)."""
