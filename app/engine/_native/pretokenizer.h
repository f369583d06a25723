/*
 * pretokenizer.h: hand-written pre-tokenizers over UTF-8 for the bundled patterns (gpt2, cl100k, o200k, llama3,
 * qwen2, tekken) and split sequences (deepseek_v3), shared by the encoding core (tokcore.c) and the trainer
 * (trainer.c). Header-only (static functions); each including translation unit calls pretok_init() once before
 * scanning.
 *
 * Each scanner returns the end (byte offset) of the piece starting at byte offset i, reproducing what the `regex`
 * module's findall yields for the pattern, alternative by alternative, including the consequences of
 * backtracking (see the comments at each alternative). Character classes come from unicode_tables.h, generated
 * from the pinned `regex` module by scripts/gen_unicode_tables.py. Input must be valid UTF-8 (the decoder does
 * not validate).
 */
#ifndef TOK_PRETOKENIZER_H
#define TOK_PRETOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "unicode_tables.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum {
    SCAN_NONE = 0, SCAN_GPT2 = 1, SCAN_CL100K = 2, SCAN_O200K = 3, SCAN_LLAMA3 = 4, SCAN_QWEN2 = 5,
    SCAN_DEEPSEEK_V3 = 6, SCAN_TEKKEN = 7, SCAN_LAST = 7
};

/* ------------------------------------------------------------------------------------------------ unicode */

/* char_at and the run helpers are always inlined: the run helpers' class mask is a constant at every call site, so
 * each copy tests its own mask as an immediate, and no call is paid per character or per run (GCC otherwise keeps
 * out-of-line copies for scan_cl100k and the o200k family, called with the mask as an argument). */
#if defined(__GNUC__)
#define PRETOK_INLINE __attribute__((always_inline)) inline
#else
#define PRETOK_INLINE inline
#endif

static uint16_t ascii_flags[128];
/* Classes of the 256 byte values for the scanners' ASCII word paths: AC_PRE an ASCII character of
 * [^\r\n\p{L}\p{N}], AC_UPPER one in A and not B (A-Z), AC_LOWER one in B and not A (a-z); 0 otherwise, every byte
 * from 0x80 up included. Derived from ascii_flags by pretok_init. */
enum { AC_PRE = 1, AC_UPPER = 2, AC_LOWER = 3 };
static uint8_t ascii_class[256];
/* Flags of every code point below U+0800 (the one- and two-byte UTF-8 characters), indexed directly: one load
 * instead of ut_flags' two for the Latin, Greek, Cyrillic, Hebrew, Arabic... letters (4 KiB). */
static uint16_t low_flags[0x800];

static inline uint16_t ut_flags(uint32_t cp)
{
    return UT_STAGE2[((uint32_t)UT_STAGE1[cp >> UT_BLOCK_SHIFT] << UT_BLOCK_SHIFT) | (cp & UT_BLOCK_MASK)];
}

/* Flags of the character at byte offset i (< n) and its length in bytes. */
static PRETOK_INLINE uint16_t char_at(const uint8_t *s, size_t i, size_t *len)
{
    uint32_t b = s[i];
    uint32_t cp;
    if (b < 0x80) {
        *len = 1;
        return ascii_flags[b];
    }
    if (b < 0xE0) { /* U+0080..U+07FF (for any bytes at all, the index stays below 0x800) */
        *len = 2;
        return low_flags[((b & 0x1F) << 6) | (s[i + 1] & 0x3F)];
    }
    if (b < 0xF0) {
        cp = ((b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        *len = 3;
    } else {
        cp = ((b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) |
             (s[i + 3] & 0x3F);
        *len = 4;
    }
    return ut_flags(cp);
}

/* Start of the character that ends at byte offset i (i > 0). */
static inline size_t prev_start(const uint8_t *s, size_t i)
{
    do {
        i--;
    } while ((s[i] & 0xC0) == 0x80);
    return i;
}

/* First offset >= i whose character has none of the bits in mask (or n). */
static PRETOK_INLINE size_t run_any(const uint8_t *s, size_t i, size_t n, uint16_t mask)
{
    size_t len;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            if (!(ascii_flags[b] & mask))
                return i;
            i++;
            continue;
        }
        if (!(char_at(s, i, &len) & mask))
            return i;
        i += len;
    }
    return n;
}

/* First offset >= i whose character has one of the bits in mask (or n). */
static PRETOK_INLINE size_t run_none(const uint8_t *s, size_t i, size_t n, uint16_t mask)
{
    size_t len;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            if (ascii_flags[b] & mask)
                return i;
            i++;
            continue;
        }
        if (char_at(s, i, &len) & mask)
            return i;
        i += len;
    }
    return n;
}

#define IS_P(f) (!((f) & (UT_L | UT_N | UT_S)))     /* [^\s\p{L}\p{N}] */
#define IS_PRE(f) (!((f) & (UT_L | UT_N | UT_NL))) /* [^\r\n\p{L}\p{N}] */
#define LETTER(f) ((f) >> UT_LETTER_SHIFT)

/* First offset >= i whose byte is not an ASCII letter (fold 0x20: a-z only when fold is 0x00, a-z and A-Z when it
 * is 0x20), or n. Sixteen bytes at a time where sixteen remain (SSE2), so the run's end costs one unpredictable
 * branch per sixteen letters instead of one per word. */
static inline size_t ascii_letter_run(const uint8_t *s, size_t i, size_t n, uint8_t fold)
{
#if defined(__SSE2__)
    const __m128i f = _mm_set1_epi8((char)fold), lo = _mm_set1_epi8('a' - 1), hi = _mm_set1_epi8('z' + 1);
    while (n - i >= 16) { /* (bytes from 0x80 up are negative as signed chars, below 'a') */
        __m128i v = _mm_or_si128(_mm_loadu_si128((const __m128i *)(const void *)(s + i)), f);
        unsigned not_letter = 0xFFFFu ^ (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpgt_epi8(v, lo),
                                                                                   _mm_cmplt_epi8(v, hi)));
        if (not_letter)
            return i + (size_t)__builtin_ctz(not_letter);
        i += 16;
    }
#endif
    while (i < n && (uint8_t)((s[i] | fold) - 'a') < 26)
        i++;
    return i;
}

/* The ASCII word of the cl100k, llama3, qwen2 and gpt2 letter alternatives at i: an optional prefix character
 * (gpt2: a space only; the others: an ASCII [^\r\n\p{L}\p{N}]) then ASCII letters, ended by the text's end or
 * by an ASCII byte (no letter: the letter run \p{L}+ stops there). Returns its end, or 0 when the piece at i is
 * not such a word (no letter, or a byte from 0x80 up after the letters, which may be a letter): the scanner's
 * general path decides then. Callers first rule out the contraction alternative that precedes it (an apostrophe
 * at i). */
static inline size_t ascii_word(const uint8_t *s, size_t i, size_t n, int space_prefix_only)
{
    size_t k = i + (space_prefix_only ? s[i] == ' ' : ascii_class[s[i]] == AC_PRE);
    size_t e = ascii_letter_run(s, k, n, 0x20);
    return e > k && (e == n || s[e] < 0x80) ? e : 0;
}

/* Case-insensitive contraction at i (s[i] == '\''): (?i:'s|'t|'re|'ve|'m|'ll|'d) (cl100k's
 * '(?i:[sdmt]|ll|ve|re) is the same set). Returns the end offset, or 0 if none matches. */
static inline size_t contraction_ci(const uint8_t *s, size_t i, size_t n)
{
    size_t j = i + 1, l1, l2;
    if (j >= n)
        return 0;
    unsigned c1 = LETTER(char_at(s, j, &l1));
    if (c1 == UT_LETTER_S || c1 == UT_LETTER_T || c1 == UT_LETTER_M || c1 == UT_LETTER_D)
        return j + l1;
    if (c1 == UT_LETTER_L || c1 == UT_LETTER_V || c1 == UT_LETTER_R) {
        size_t k = j + l1;
        if (k >= n)
            return 0;
        unsigned c2 = LETTER(char_at(s, k, &l2));
        if ((c1 == UT_LETTER_L && c2 == UT_LETTER_L) || (c1 != UT_LETTER_L && c2 == UT_LETTER_E))
            return k + l2;
    }
    return 0;
}

/* Offset after up to three \p{N} characters starting at i (the first one is known to be \p{N}, length l0). */
static inline size_t digits3(const uint8_t *s, size_t i, size_t n, size_t l0)
{
    size_t e = i + l0, len;
    for (int k = 0; k < 2 && e < n; k++) {
        if (!(char_at(s, e, &len) & UT_N))
            break;
        e += len;
    }
    return e;
}

/* Offset after the last [\r\n] in the whitespace run [i, w), or 0 if there is none. \r and \n are single bytes
 * and never continuation bytes, so a byte scan is exact. */
static inline size_t after_last_newline(const uint8_t *s, size_t i, size_t w)
{
    for (size_t k = w; k > i; k--)
        if (s[k - 1] == '\n' || s[k - 1] == '\r')
            return k;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ scanners */

/* gpt2: '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
 * (Always inlined where its address is not taken: encode_text has a copy of its loop for it.) */
static PRETOK_INLINE size_t scan_gpt2(const uint8_t *s, size_t i, size_t n)
{
    size_t l0, l1;
    uint8_t b = s[i];
    if (b == '\'' && i + 1 < n) {
        uint8_t c = s[i + 1];
        if (c == 's' || c == 'd' || c == 'm' || c == 't')
            return i + 2;
        if (i + 2 < n) {
            uint8_t d = s[i + 2];
            if ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e'))
                return i + 3;
        }
    }
    size_t e = ascii_word(s, i, n, 1);
    if (e)
        return e;
    if (b == ' ' && i + 1 < n) {
        uint16_t f1 = char_at(s, i + 1, &l1);
        if (f1 & UT_L)
            return run_any(s, i + 1 + l1, n, UT_L);
        if (f1 & UT_N)
            return run_any(s, i + 1 + l1, n, UT_N);
        if (IS_P(f1))
            return run_none(s, i + 1 + l1, n, UT_L | UT_N | UT_S);
    }
    uint16_t f0 = char_at(s, i, &l0);
    if (f0 & UT_L)
        return run_any(s, i + l0, n, UT_L);
    if (f0 & UT_N)
        return run_any(s, i + l0, n, UT_N);
    if (IS_P(f0))
        return run_none(s, i + l0, n, UT_L | UT_N | UT_S);
    /* whitespace */
    size_t w = run_any(s, i + l0, n, UT_S);
    if (w == n) /* \s++$ (the possessive run cannot stop before a final \n: it is whitespace too) */
        return w;
    size_t last = prev_start(s, w); /* \s+(?!\S): back off one character when the run is longer than one */
    if (last > i)
        return last;
    return i + l0; /* \s */
}

/* ` ?[^\s\p{L}\p{N}]++` followed by `[\r\n]*` (extra_slash: `[\r\n/]*`), or 0 if it does not match at i. */
static inline size_t punct_piece(const uint8_t *s, size_t i, size_t n, uint16_t f0, size_t l0, int extra_slash)
{
    size_t start, l1;
    if (s[i] == ' ') {
        if (i + 1 >= n)
            return 0;
        uint16_t f1 = char_at(s, i + 1, &l1);
        if (!IS_P(f1))
            return 0;
        start = i + 1 + l1;
    } else if (IS_P(f0)) {
        start = i + l0;
    } else {
        return 0;
    }
    size_t e = run_none(s, start, n, UT_L | UT_N | UT_S);
    if (extra_slash) {
        while (e < n && (s[e] == '\r' || s[e] == '\n' || s[e] == '/'))
            e++;
    } else {
        while (e < n && (s[e] == '\r' || s[e] == '\n'))
            e++;
    }
    return e;
}

/* cl100k: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|
 *         \s*[\r\n]|\s+(?!\S)|\s */
static size_t scan_cl100k(const uint8_t *s, size_t i, size_t n)
{
    size_t l0, l1, e;
    if (s[i] == '\'' && (e = contraction_ci(s, i, n)))
        return e;
    if ((e = ascii_word(s, i, n, 0)))
        return e;
    uint16_t f0 = char_at(s, i, &l0);
    if (f0 & UT_L)
        return run_any(s, i + l0, n, UT_L);
    /* The possessive prefix: a [^\r\n\p{L}\p{N}] character must be followed by a letter (without the prefix the
     * alternative cannot match either, since the character is not a letter). */
    if (IS_PRE(f0) && i + l0 < n && (char_at(s, i + l0, &l1) & UT_L))
        return run_any(s, i + l0 + l1, n, UT_L);
    if (f0 & UT_N)
        return digits3(s, i, n, l0);
    if ((e = punct_piece(s, i, n, f0, l0, 0)))
        return e;
    /* whitespace */
    size_t w = run_any(s, i + l0, n, UT_S);
    if (w == n) /* \s++$ */
        return w;
    if ((e = after_last_newline(s, i, w))) /* \s*[\r\n]: greedy \s* backs off to the last newline of the run */
        return e;
    size_t last = prev_start(s, w); /* \s+(?!\S) */
    if (last > i)
        return last;
    return i + l0; /* \s */
}

/* Whitespace tail shared by llama3 and o200k: \s*[\r\n]+|\s+(?!\S)|\s+ at a whitespace character (length l0). */
static inline size_t space_piece_nl_plus(const uint8_t *s, size_t i, size_t n, size_t l0)
{
    size_t w = run_any(s, i + l0, n, UT_S);
    size_t e = after_last_newline(s, i, w); /* \s*[\r\n]+: ends after the run's last newline */
    if (e)
        return e;
    if (w == n) /* \s+(?!\S) at the end of the text */
        return w;
    size_t last = prev_start(s, w); /* \s+(?!\S): back off one character */
    if (last > i)
        return last;
    return w; /* \s+ (a single character here) */
}

/* llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *         \s*[\r\n]+|\s+(?!\S)|\s+
 * qwen2 (Qwen2/2.5/3 tokenizer.json Split) is the same with \p{N} for \p{N}{1,3}: three_digits = 0. At a \p{N}
 * character no earlier alternative matches (the contraction needs an apostrophe; the letter alternative's optional
 * prefix excludes \p{N} and a \p{N} is no letter), so the digit alternative decides alone. No alternative is
 * possessive: the letter prefix is tried with and without ([^\r\n\p{L}\p{N}]? gives the character back when no
 * letter follows, and the character then starts a punctuation or whitespace piece), and \s+(?!\S) backs off one
 * character (space_piece_nl_plus). */
static inline size_t scan_llama_family(const uint8_t *s, size_t i, size_t n, int three_digits)
{
    size_t l0, l1, e;
    if (s[i] == '\'' && (e = contraction_ci(s, i, n)))
        return e;
    if ((e = ascii_word(s, i, n, 0)))
        return e;
    uint16_t f0 = char_at(s, i, &l0);
    if (f0 & UT_L)
        return run_any(s, i + l0, n, UT_L);
    if (IS_PRE(f0) && i + l0 < n && (char_at(s, i + l0, &l1) & UT_L))
        return run_any(s, i + l0 + l1, n, UT_L);
    if (f0 & UT_N)
        return three_digits ? digits3(s, i, n, l0) : i + l0;
    if ((e = punct_piece(s, i, n, f0, l0, 0)))
        return e;
    return space_piece_nl_plus(s, i, n, l0);
}

static size_t scan_llama3(const uint8_t *s, size_t i, size_t n) { return scan_llama_family(s, i, n, 1); }

static size_t scan_qwen2(const uint8_t *s, size_t i, size_t n) { return scan_llama_family(s, i, n, 0); }

/* o200k alternative 1 without its prefix, from offset st: [A]*[B]+ where A = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
 * B = [\p{Ll}\p{Lm}\p{Lo}\p{M}]. Greedy A* takes the maximal A run [st, a); B+ then needs a B character: either
 * at a (then B+ takes the maximal B run), or A* gives back characters until the next one is in B -- the last
 * B character inside the A run, where B+ can take only that one character (its successors in the run are not
 * B, nor is the character at a). One pass decodes each character once: the A run notes the end of its last B
 * character as it goes (instead of walking back over the run), and the character at a, decoded when the run
 * stops, decides directly. Returns the end offset or 0 if the alternative fails; *a_end gets a (the maximal A
 * run's end, which alternative 2 needs when this one fails). */
static inline size_t o200k_alt1(const uint8_t *s, size_t st, size_t n, size_t *a_end)
{
    size_t k = st, len = 0, b_end = 0;
    uint16_t f = 0;
    while (k < n) {
        uint8_t b = s[k];
        if (b < 0x80) {
            f = ascii_flags[b];
            len = 1;
        } else {
            f = char_at(s, k, &len);
        }
        if (!(f & UT_A))
            break;
        if (f & UT_B)
            b_end = k + len;
        k += len;
    }
    *a_end = k;
    if (k < n && (f & UT_B)) /* (f, len: the character at k, which stopped the run) */
        return run_any(s, k + len, n, UT_B);
    return b_end;
}

/* Optional case-insensitive contraction suffix of o200k's letter alternatives (contractions = 0: none, tekken). */
static inline size_t o200k_suffix(const uint8_t *s, size_t e, size_t n, int contractions)
{
    if (contractions && e < n && s[e] == '\'') {
        size_t c = contraction_ci(s, e, n);
        if (c)
            return c;
    }
    return e;
}

/* o200k: [^\r\n\p{L}\p{N}]?A*B+C|[^\r\n\p{L}\p{N}]?A+B*C|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|
 *        \s+(?!\S)|\s+      with C = (?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * tekken (Mistral's tekken files, config.pattern) is the same without C (contractions = 0) and with \p{N} for
 * \p{N}{1,3} (three_digits = 0). Without C an apostrophe after a word is no longer part of it: it starts the next
 * piece, through alternative 1's prefix when a letter follows it, else as punctuation, which the branches below
 * already do for any other such character. At a \p{N} character the letter alternatives fail (the prefix excludes
 * \p{N} and a \p{N} is neither A nor B), so the digit alternative decides alone, as in qwen2. */
#if defined(__GNUC__)
__attribute__((always_inline)) /* one copy per scanner with its switches folded in (GCC keeps one shared copy) */
#endif
static inline size_t scan_o200k_family(const uint8_t *s, size_t i, size_t n, int contractions, int three_digits)
{
    size_t l0, e, a_pre = 0, a_own = 0;
    /* The ASCII word (most pieces of English and code): an optional ASCII prefix character, [A-Z]*[a-z]+, then the
     * text's end or an ASCII character other than an apostrophe. That is what alternative 1 matches there: the
     * prefix is taken when present (`?` is greedy), A* takes the uppercase run and B+ the lowercase one, both stop
     * at an ASCII character that is not theirs, and no suffix can follow. Anything else (no lowercase letter, a
     * byte from 0x80 up or an apostrophe after the letters) takes the general path below from i. */
    {
        size_t u = i + (ascii_class[s[i]] == AC_PRE);
        while (u < n && ascii_class[s[u]] == AC_UPPER)
            u++;
        e = ascii_letter_run(s, u, n, 0);
        if (e > u && (e == n || (s[e] < 0x80 && s[e] != '\'')))
            return e;
    }
    uint16_t f0 = char_at(s, i, &l0);
    int pre = IS_PRE(f0) && i + l0 < n;
    /* Alternative 1: first with the optional prefix, then (the regex backtracks into `?`) without it. */
    if (pre && (e = o200k_alt1(s, i + l0, n, &a_pre)))
        return o200k_suffix(s, e, n, contractions);
    if ((f0 & (UT_A | UT_B)) && (e = o200k_alt1(s, i, n, &a_own)))
        return o200k_suffix(s, e, n, contractions);
    /* Alternative 2: A+ B* (greedy, nothing after them can force a back-off). A+ is the maximal A run alternative
     * 1 just read from the same start (a_pre after the prefix, a_own from i), nonempty iff it ends past its
     * start; B* is then empty, since alternative 1 failed: the character ending the run is not B. */
    if (pre && a_pre > i + l0)
        return o200k_suffix(s, a_pre, n, contractions);
    if (f0 & UT_A) /* (then alternative 1 ran from i: f0 is in A) */
        return o200k_suffix(s, a_own, n, contractions);
    if (f0 & UT_N)
        return three_digits ? digits3(s, i, n, l0) : i + l0;
    if ((e = punct_piece(s, i, n, f0, l0, 1)))
        return e;
    return space_piece_nl_plus(s, i, n, l0);
}

static size_t scan_o200k(const uint8_t *s, size_t i, size_t n) { return scan_o200k_family(s, i, n, 1, 1); }

static size_t scan_tekken(const uint8_t *s, size_t i, size_t n) { return scan_o200k_family(s, i, n, 0, 0); }

/* deepseek_v3: three Hugging Face Split(Isolated) pre-tokenizers in turn, each on every piece of the previous one
 * (matched and unmatched alike; a piece is the whole subject of the next regex, so its end is end-of-text for
 * \s+(?!\S)), unmatched stretches kept:
 *   1. \p{N}{1,3}                  digits in groups of up to three (the third split leaves such a piece whole:
 *                                  no alternative matches at a digit followed by digits, so it is one unmatched
 *                                  stretch);
 *   2. [一-龥぀-ゟ゠-ヿ]+            runs of these CJK ranges (DCJK; no \p{N}, no \s in them);
 *   3. on each DCJK run and on each stretch between (no \p{N}, no DCJK):
 *      [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ |
 *      ` ?[\p{P}\p{S}]+[\r\n]*` | \s*[\r\n]+ | \s+(?!\S) | \s+
 * So step 3 runs on stretches of one kind: inside a DCJK run its letter/mark and punctuation/symbol classes are CLM
 * and CPS (the classes within DCJK), elsewhere DLM and DPS (without DCJK; \p{N} is in none of them, nor in \s),
 * and every run stops at the stretch's end by itself. Positions where no alternative matches form one piece up
 * to the next match (or the stretch's end). */

static inline int ds_ascii_punct(uint8_t b)
{
    return (b >= '!' && b <= '/') || (b >= ':' && b <= '@') || (b >= '[' && b <= '`') || (b >= '{' && b <= '~');
}

static inline int ds_ascii_alpha(uint8_t b) { return (uint8_t)((b | 0x20) - 'a') < 26; }

/* End of the run of class lm (letters and marks) from i: outside DCJK its ASCII part, A-Z and a-z, sixteen bytes at
 * a time. */
static inline size_t ds_letter_run(const uint8_t *s, size_t i, size_t n, uint16_t lm)
{
    if (lm == UT_DLM) {
        i = ascii_letter_run(s, i, n, 0x20);
        if (i == n || s[i] < 0x80)
            return i;
    }
    return run_any(s, i, n, lm);
}

/* End of the step-3 match at i (f0, l0: the character there) in a stretch whose classes are lm and ps, or 0 if
 * no alternative matches. */
static size_t ds_match(const uint8_t *s, size_t i, size_t n, uint16_t f0, size_t l0, uint16_t lm, uint16_t ps)
{
    size_t l1, e;
    uint8_t b = s[i];
    if (ds_ascii_punct(b) && i + 1 < n && ds_ascii_alpha(s[i + 1])) { /* ASCII punctuation + ASCII letters */
        e = i + 2;
        while (e < n && ds_ascii_alpha(s[e]))
            e++;
        return e;
    }
    /* [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+: a letter or mark starts the run itself (a mark taken as the prefix ends
     * the run at the same place); another allowed character needs a letter or mark of the stretch after it. */
    if (f0 & lm)
        return ds_letter_run(s, i + l0, n, lm);
    if (!(f0 & (UT_L | ps | UT_NL)) && i + l0 < n && (char_at(s, i + l0, &l1) & lm))
        return ds_letter_run(s, i + l0 + l1, n, lm);
    /*  ?[\p{P}\p{S}]+[\r\n]* */
    size_t start = 0;
    if (b == ' ' && i + 1 < n && (char_at(s, i + 1, &l1) & ps))
        start = i + 1 + l1;
    else if (f0 & ps)
        start = i + l0;
    if (start) {
        e = run_any(s, start, n, ps);
        while (ps == UT_DPS && e < n && (s[e] == '\r' || s[e] == '\n')) /* (a DCJK stretch ends before them) */
            e++;
        return e;
    }
    if (!(f0 & UT_S))
        return 0;
    /* \s*[\r\n]+ | \s+(?!\S) | \s+ (only outside DCJK), the stretch's end being end-of-text */
    size_t w = run_any(s, i + l0, n, UT_S);
    if ((e = after_last_newline(s, i, w)))
        return e;
    if (w == n || (char_at(s, w, &l1) & (UT_N | UT_DCJK)))
        return w;
    size_t last = prev_start(s, w);
    return last > i ? last : w;
}

static size_t scan_deepseek_v3(const uint8_t *s, size_t i, size_t n)
{
    size_t l0, e;
    uint16_t f0 = char_at(s, i, &l0);
    if (f0 & UT_N)
        return digits3(s, i, n, l0);
    int cjk = (f0 & UT_DCJK) != 0;
    uint16_t lm = cjk ? UT_CLM : UT_DLM, ps = cjk ? UT_CPS : UT_DPS;
    if ((e = ds_match(s, i, n, f0, l0, lm, ps)))
        return e;
    /* an unmatched stretch: up to the next position where a match starts, or the step-3 stretch's end */
    e = i + l0;
    while (e < n) {
        uint16_t f = char_at(s, e, &l0);
        if ((cjk ? !(f & UT_DCJK) : (f & (UT_N | UT_DCJK)) != 0) || ds_match(s, e, n, f, l0, lm, ps))
            break;
        e += l0;
    }
    return e;
}

typedef size_t (*scan_fn)(const uint8_t *, size_t, size_t);

static scan_fn scanner_of(int id)
{
    switch (id) {
    case SCAN_GPT2:
        return scan_gpt2;
    case SCAN_CL100K:
        return scan_cl100k;
    case SCAN_O200K:
        return scan_o200k;
    case SCAN_LLAMA3:
        return scan_llama3;
    case SCAN_QWEN2:
        return scan_qwen2;
    case SCAN_DEEPSEEK_V3:
        return scan_deepseek_v3;
    case SCAN_TEKKEN:
        return scan_tekken;
    default:
        return NULL;
    }
}

/* Fill the ASCII fast-path table; call once (module init) before any scanner runs. */
static void pretok_init(void)
{
    for (uint32_t c = 0; c < 128; c++) {
        uint16_t f = ascii_flags[c] = ut_flags(c);
        uint16_t ab = f & (UT_A | UT_B);
        ascii_class[c] = ab == UT_A ? AC_UPPER : ab == UT_B ? AC_LOWER : IS_PRE(f) ? AC_PRE : 0;
    }
    for (uint32_t c = 0; c < 0x800; c++)
        low_flags[c] = ut_flags(c);
}

#endif /* TOK_PRETOKENIZER_H */
