"""The textbook's worked examples of classic BPE, reproduced exactly."""

from __future__ import annotations

from app.engine.training import train_char_bpe

SENNRICH = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
HF_COURSE = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}


def test_low_lower_newest_widest_first_merges() -> None:
    model = train_char_bpe(SENNRICH, num_merges=3, min_frequency=1)
    assert model.merge_strings == [("e", "s"), ("es", "t"), ("est", "</w>")]


def test_unseen_word_lowest_encodes_as_low_est() -> None:
    model = train_char_bpe(SENNRICH, num_merges=5, min_frequency=1)
    assert model.merge_strings == [("e", "s"), ("es", "t"), ("est", "</w>"), ("l", "o"), ("lo", "w")]
    assert "lowest" not in SENNRICH
    assert model.segment("lowest") == ["low", "est</w>"]


def test_hug_pug_pun_bun_hugs_merges_and_vocabulary() -> None:
    model = train_char_bpe(HF_COURSE, num_merges=4, min_frequency=1)
    assert model.merge_strings == [("u", "g"), ("u", "n"), ("un", "</w>"), ("h", "ug")]
    symbols = model.vocab[1:]  # without <unk>
    assert len(symbols) == 12
    assert set(symbols) == {"</w>", "b", "g", "h", "n", "p", "s", "u", "ug", "un", "un</w>", "hug"}


def test_training_segmentation_of_the_hug_corpus() -> None:
    model = train_char_bpe(HF_COURSE, num_merges=4, min_frequency=1, keep_segmentation=True)
    seg = {w: [model.vocab[i] for i in ids] for w, ids in model.segmentation.items()}
    assert seg == {
        "hug": ["hug", "</w>"],
        "pug": ["p", "ug", "</w>"],
        "pun": ["p", "un</w>"],
        "bun": ["b", "un</w>"],
        "hugs": ["hug", "s", "</w>"],
    }
    for word, expected in seg.items():
        assert model.segment(word) == expected


def test_merge_order_matters() -> None:
    model = train_char_bpe(SENNRICH, num_merges=5, min_frequency=1)
    for word in ["widest", "lowest", "newest", "low"]:
        assert model.segment_in_order(word) == model.segment(word)
    assert model.segment_in_order("widest") == ["w", "i", "d", "est</w>"]
    assert model.segment_in_order("lowest") == ["low", "est</w>"]
    # The same merges applied in reverse order: (lo,w), (est,</w>) and (es,t) find nothing to merge when they
    # come before the merges that build their parts, so the segmentation differs and is not what training made.
    reverse = list(reversed(model.merges))
    assert model.segment_in_order("widest", reverse) == ["w", "i", "d", "es", "t", "</w>"]
    assert model.segment_in_order("lowest", reverse) == ["lo", "w", "es", "t", "</w>"]


def test_lexicographic_tie_break_takes_the_greatest_pair() -> None:
    model = train_char_bpe(SENNRICH, num_merges=3, min_frequency=1, tie_break="lexicographic")
    # (e,s), (s,t), (t,</w>) all occur 9 times; ("t", "</w>") is the greatest.
    assert model.merge_strings[0] == ("t", "</w>")
    assert model.merge_strings == [("t", "</w>"), ("s", "t</w>"), ("e", "st</w>")]


def test_min_frequency_stops_training() -> None:
    model = train_char_bpe(SENNRICH, min_frequency=7)
    # counts: es/est/est</w> 9, lo/low 7, then nothing reaches 7.
    assert model.merge_strings == [("e", "s"), ("es", "t"), ("est", "</w>"), ("l", "o"), ("lo", "w")]
    assert model.stop_reason == "min frequency reached"
