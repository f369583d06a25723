"""Code points Hugging Face ``tokenizers`` normalizes as unassigned (GENERATED — do not edit).

Produced by ``scripts/gen_hf_unicode_exceptions.py`` with tokenizers 0.23.3 against Python's
``unicodedata`` 14.0.0: every code point Python assigns a nonzero combining class or a
decomposition mapping whose NFC/NFD/NFKC/NFKD in Hugging Face differs from Python's, each verified in
17 contexts for all four forms to behave in Hugging Face as an unassigned code point (a starter with
no decomposition and no composition). Hugging Face's tables agree with Unicode 9.0.
"""

#: Unicode version of Python's tables the set was computed against (the set is only valid for it).
UNIDATA_VERSION = "14.0.0"
#: Unicode version Hugging Face's normalization tables correspond to.
HF_UNICODE_VERSION = "9.0"
#: The 171 code points, as a regular-expression character class body.
EXCEPTIONS = (
    "\U000007fd\U00000898-\U0000089f\U000008ca-\U000008d3\U000009fe\U00000c3c"
    "\U00000d3b-\U00000d3c\U00000eba\U00001715\U00001abf-\U00001ace\U00001df6-\U00001dfa"
    "\U000032ff\U0000a7f2-\U0000a7f4\U0000a82c\U0000ab69\U00010781-\U00010785"
    "\U00010787-\U000107b0\U000107b2-\U000107ba\U00010d24-\U00010d27\U00010eab-\U00010eac\U00010f46-\U00010f50"
    "\U00010f82-\U00010f85\U00011070\U0001133b\U0001145e\U00011839-\U0001183a"
    "\U00011938\U0001193d-\U0001193e\U00011943\U000119e0\U00011a34"
    "\U00011a47\U00011a99\U00011d42\U00011d44-\U00011d45\U00011d97"
    "\U00016ff0-\U00016ff1\U0001e130-\U0001e136\U0001e2ae\U0001e2ec-\U0001e2ef\U0001f16c"
    "\U0001fbf0-\U0001fbf9"
)
#: Second characters of the new canonical composites' pairs (starters): Hugging Face composes nothing into them,
#: so text is cut before each.
CUT_BEFORE = (
    "\U00011930"
)
