/* The Unigram model (Viterbi over scored pieces) and SentencePiece's normalizer, compiled.
 *
 * The same algorithm and the same ids as the pure-Python reference (``app/engine/pipeline/models/unigram.py`` and
 * ``app/engine/pipeline/sp_normalizer.py``):
 *
 * - ``Model``: the matchable pieces in a double-array trie over their characters (each character of the pieces is
 *   a label, the most frequent first; base + label, check = parent), built once.  The normalized text (UTF-8) is
 *   turned into labels (by the normalizer as it writes it, when there is one), then for every start (one
 *   character at a time) the trie is walked along the text; every piece that ends there extends the best path
 *   ending at the start, and a start that no single-character piece covers gets an unknown node (the unknown
 *   score).  Ties keep the path found first (a candidate replaces the
 *   best only when strictly greater).  Two arithmetics: ``float32`` (SentencePiece: scores and sums are 32-bit floats; once the
 *   best score at a start leaves +-100,000 every reached score is re-based by it, as the reference does) and
 *   double (Hugging Face).  Runs of unknown nodes are fused; a run is then the piece spelled by it (double only),
 *   else its bytes as ``<0xNN>`` pieces with byte fallback when every one exists, else the unknown id.
 * - ``Normalizer``: SentencePiece's ``NormalizerSpec`` over the precompiled charsmap blob itself (its darts-clone
 *   double array is walked in place: the longest key at each position wins), the user-defined pieces (matched
 *   first, never rewritten), the dummy prefix, extra-whitespace removal and ``\u2581`` for spaces, in the
 *   reference's order.  Lone surrogates become U+FFFD first (a surrogate pair becomes its character).
 *
 * ``Model.encode(items, normalizer)`` normalizes and segments in one call with the GIL released.  Memory is linear
 * in the text (about 30 bytes per UTF-8 byte of the normalized text while a call runs, freed after it).  With
 * ``cache_size`` (float32 models whose pieces have U+2581 only first), a bounded lock-free cache keeps whole
 * words' best paths between calls and reuses one only where it is provably what the search would find at that
 * point of the text (see "words" below); the ids are the same with it on or off.  Objects are thread-safe (the
 * cache is the only state that changes after construction).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "bytes_hash.h"
#include "hash_mix.h"
#include "py_items.h"
#include "utf8_put.h"
#include "scrub_text.h"
#include "word_cache.h"
#include "batch_threads.h"

#define RESET 100000.0f /* SentencePiece's re-basing threshold for float32 path scores */
#define UNK_MARK (-2)   /* path nodes that are unknown characters */
#define E_NOMEM (-1)
#define E_SURROGATE (-2)
#define E_NO_UNK (-3)
#define MAX_PIECE 2048 /* characters; longer pieces stay on the Python reference (the trie build recurses) */

/* ---- growable buffers --------------------------------------------------------------------------------------- */

/* A growable buffer (fields ``v``, ``n``, ``cap``, ``stack``) may start in the caller's storage (``stack``: then
 * ``v == stack`` until it outgrows it), so a short text needs no allocation. */

/* Capacity for at least n + extra items of ``elem`` bytes in *v (capacity *cap, doubled from ``first``); storage
 * that is still the caller's ``stack`` is copied out, never reallocated.  E_NOMEM leaves the buffer as it was. */
static int buf_grow(void **v, const void *stack, Py_ssize_t n, Py_ssize_t *cap, Py_ssize_t extra, size_t elem,
                    Py_ssize_t first) {
    Py_ssize_t c = *cap ? *cap : first;
    while (c - n < extra) c *= 2;
    void *nv;
    if (*v != NULL && *v == stack) {
        nv = malloc((size_t)c * elem);
        if (nv) memcpy(nv, *v, (size_t)n * elem);
    } else {
        nv = realloc(*v, (size_t)c * elem);
    }
    if (!nv) return E_NOMEM;
    *v = nv;
    *cap = c;
    return 0;
}

/* Room for ``extra`` more items in buffer b (doubled from ``first``), or E_NOMEM. */
#define BUF_RESERVE(b, extra, first)                                                                            \
    ((b)->cap - (b)->n >= (extra) ? 0                                                                           \
                                  : buf_grow((void **)&(b)->v, (b)->stack, (b)->n, &(b)->cap, (extra),         \
                                             sizeof *(b)->v, (first)))
#define BUF_FREE(b)                                                                                             \
    do {                                                                                                        \
        if ((b)->v != (b)->stack) free((b)->v);                                                                 \
    } while (0)

typedef struct {
    int32_t *v;
    Py_ssize_t n, cap;
    int32_t *stack;
} IdBuf;

static inline int ids_reserve(IdBuf *b, Py_ssize_t extra) { return BUF_RESERVE(b, extra, 64); }
static void ids_free(IdBuf *b) { BUF_FREE(b); }

static int ids_push(IdBuf *b, int32_t x) {
    if (b->n == b->cap && ids_reserve(b, 1) < 0) return E_NOMEM;
    b->v[b->n++] = x;
    return 0;
}

typedef struct {
    unsigned char *v;
    Py_ssize_t n, cap;
    unsigned char *stack;
} ByteBuf;

static inline int bytes_reserve(ByteBuf *b, Py_ssize_t extra) { return BUF_RESERVE(b, extra, 256); }
static void bytes_free(ByteBuf *b) { BUF_FREE(b); }

static inline int utf8_len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

/* Characters -> the labels of a Model's trie (see the piece trie below), so that the normalizer can write each
 * character's label as it writes the character, and the search need not decode the text again. */
typedef struct {
    const uint16_t *bmp;         /* BMP code point -> label (0: in no piece) */
    const uint32_t *astral;      /* the other code points of the pieces, ascending */
    const uint16_t *astral_label;
    Py_ssize_t n_astral;
} Labeler;

static inline uint16_t labeler_of(const Labeler *L, uint32_t c) {
    if (c < 0x10000) return L->bmp[c];
    Py_ssize_t lo = 0, hi = L->n_astral;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (L->astral[mid] < c) lo = mid + 1; else hi = mid;
    }
    return lo < L->n_astral && L->astral[lo] == c ? L->astral_label[lo] : 0;
}

/* The labels of a normalized text, one per character of its bytes (``done``: how many bytes they cover). */
typedef struct {
    uint16_t *v;
    Py_ssize_t n, cap;
    uint16_t *stack; /* as for IdBuf */
    const Labeler *of;
    Py_ssize_t done;
} LabBuf;

static inline int labs_reserve(LabBuf *b, Py_ssize_t extra) { return BUF_RESERVE(b, extra, 256); }
static void labs_free(LabBuf *b) { BUF_FREE(b); }

/* Labels for the bytes ``out`` has past ``b->done`` (whole UTF-8 characters). */
static int labs_decode(LabBuf *b, const ByteBuf *out) {
    if (labs_reserve(b, out->n - b->done + 1) < 0) return E_NOMEM;
    const unsigned char *p = out->v;
    for (Py_ssize_t i = b->done; i < out->n;) {
        uint32_t c = p[i];
        if (c < 0x80) {
            i++;
        } else if (c < 0xE0) {
            c = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
            i += 2;
        } else if (c < 0xF0) {
            c = ((c & 0x0F) << 12) | ((uint32_t)(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
            i += 3;
        } else {
            c = ((c & 0x07) << 18) | ((uint32_t)(p[i + 1] & 0x3F) << 12) | ((uint32_t)(p[i + 2] & 0x3F) << 6) |
                (p[i + 3] & 0x3F);
            i += 4;
        }
        b->v[b->n++] = labeler_of(b->of, c);
    }
    b->done = out->n;
    return 0;
}

static inline int labs_sync(LabBuf *b, const ByteBuf *out) {
    return b->done == out->n ? 0 : labs_decode(b, out);
}

/* ---- text access -------------------------------------------------------------------------------------------- */

/* A str's code points; ``scrubbed`` (owned) when lone surrogates had to be replaced. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
    Py_UCS4 *scrubbed;
} Text;

/* Lone surrogates -> U+FFFD and a high+low pair -> its character, as ``scrub_surrogates`` (UTF-16 round trip). */
static int text_scrub(Text *t) {
    t->scrubbed = NULL;
    if (t->kind == PyUnicode_1BYTE_KIND) return 0;
    Py_ssize_t i, n = t->n;
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(t->kind, t->data, i);
        if (c >= 0xD800 && c <= 0xDFFF) break;
    }
    if (i == n) return 0;
    Py_UCS4 *out = (Py_UCS4 *)malloc((size_t)(n + 1) * sizeof(Py_UCS4));
    if (!out) return E_NOMEM;
    Py_ssize_t m = scrub_code_points(t->kind, t->data, n, out);
    t->scrubbed = out;
    t->kind = PyUnicode_4BYTE_KIND;
    t->data = out;
    t->n = m;
    return 0;
}

/* The UTF-8 bytes of a text (no normalization); E_SURROGATE for a surrogate code point. */
static int text_utf8(const Text *t, ByteBuf *out) {
    Py_ssize_t per = t->kind == PyUnicode_1BYTE_KIND ? 2 : t->kind == PyUnicode_2BYTE_KIND ? 3 : 4;
    if (bytes_reserve(out, t->n * per + 1) < 0) return E_NOMEM;
    unsigned char *o = out->v + out->n;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        Py_UCS4 c = PyUnicode_READ(t->kind, t->data, i);
        if (c >= 0xD800 && c <= 0xDFFF) return E_SURROGATE;
        o += utf8_put(o, c);
    }
    out->n = o - out->v;
    return 0;
}

/* ---- the normalizer ----------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    uint32_t *units;      /* the charsmap's darts-clone double array (NULL: no charsmap) */
    Py_ssize_t n_units;
    char *pool;           /* its NUL-terminated replacement strings */
    Py_ssize_t pool_len;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, treat_whitespace_as_suffix;
    Py_UCS4 *user;        /* user-defined pieces, concatenated, longest first */
    Py_ssize_t *user_start, *user_len;
    Py_ssize_t n_user;
    uint8_t *user_first;  /* bitmap over code points: starts a user-defined piece */
    int plain;            /* no charsmap and no user-defined pieces: every character is copied */
    /* per ASCII character c (no user-defined piece starting with it): what the charsmap makes of it when the
     * next character's first UTF-8 byte b has bit b of asc_cont[c] clear (no key continues that way) */
    uint8_t asc_fast[128];
    const char *asc_rep[128]; /* NULL: c itself */
    uint64_t asc_cont[128][4];
    uint8_t asc_simple[128]; /* copied as it is when the next character continues no key */
    uint8_t asc_run[128];    /* taken by the copy loop: asc_simple, or asc_space */
    uint8_t asc_space[128];  /* a space the charsmap leaves alone, or a character it makes one space (newline) */
    int asc_simple_any;
    uint8_t *plain_cp; /* bitmap over code points: no charsmap key and no user-defined piece starts with it */
    /* per BMP character c >= 0x80 that starts a key (and no user-defined piece): the charsmap position after c
     * (-1: not kept) and the pool offset of c's own replacement (-1: c is not a key), so that when the next
     * character's first byte continues no key, the answer needs no walk */
    int32_t *bmp_after, *bmp_leaf;
} Normalizer;

static void Normalizer_dealloc(Normalizer *self) {
    free(self->units);
    free(self->pool);
    free(self->user);
    free(self->user_start);
    free(self->user_len);
    free(self->user_first);
    free(self->plain_cp);
    free(self->bmp_after);
    free(self->bmp_leaf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline uint32_t da_offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

/* The longest charsmap key at ``t[i:]``: its length in characters (0: none) and its replacement. */
static Py_ssize_t charsmap_longest(const Normalizer *nz, const Text *t, Py_ssize_t i, const char **rep) {
    const uint32_t *u = nz->units;
    Py_ssize_t nu = nz->n_units;
    uint32_t id = da_offset(u[0]);
    Py_ssize_t best = 0;
    unsigned char enc[4];
    for (Py_ssize_t j = i; j < t->n; j++) {
        int k = utf8_put(enc, PyUnicode_READ(t->kind, t->data, j));
        uint32_t unit = 0;
        for (int b = 0; b < k; b++) {
            uint32_t c = enc[b];
            if (c == 0) return best;
            id ^= c;
            if ((Py_ssize_t)id >= nu) return best;
            unit = u[id];
            if ((unit & 0x800000FFu) != c) return best;
            id ^= da_offset(unit);
            if ((Py_ssize_t)id >= nu) return best;
        }
        if ((unit >> 8) & 1) {
            uint32_t value = u[id] & 0x7FFFFFFFu;
            if ((Py_ssize_t)value < nz->pool_len && memchr(nz->pool + value, 0, (size_t)(nz->pool_len - value))) {
                best = j + 1 - i;
                *rep = nz->pool + value;
            }
        }
    }
    return best;
}

/* One step of SentencePiece's ``NormalizePrefix`` at ``t[i:]``: the output (``*ubuf`` code points when
 * ``*is_cp``, else ``*rep`` UTF-8) and the characters consumed. */
typedef struct {
    const char *rep;       /* UTF-8 replacement (charsmap) */
    Py_ssize_t rep_len;
    Py_ssize_t cp_from, cp_len; /* or code points t[cp_from : cp_from + cp_len] */
    int is_cp;
} Out;

static Py_ssize_t norm_prefix(const Normalizer *nz, const Text *t, Py_ssize_t i, Out *o) {
    Py_UCS4 ch = PyUnicode_READ(t->kind, t->data, i);
    if (nz->user_first && ch < 0x110000 && (nz->user_first[ch >> 3] >> (ch & 7)) & 1) {
        for (Py_ssize_t k = 0; k < nz->n_user; k++) {
            Py_ssize_t len = nz->user_len[k];
            if (i + len > t->n) continue;
            const Py_UCS4 *p = nz->user + nz->user_start[k];
            Py_ssize_t q = 0;
            while (q < len && p[q] == PyUnicode_READ(t->kind, t->data, i + q)) q++;
            if (q == len) {
                o->is_cp = 1;
                o->cp_from = i;
                o->cp_len = len;
                return len;
            }
        }
    }
    if (nz->units) {
        const char *rep = NULL;
        Py_ssize_t used = charsmap_longest(nz, t, i, &rep);
        if (used) {
            o->is_cp = 0;
            o->rep = rep;
            o->rep_len = (Py_ssize_t)strlen(rep);
            return used;
        }
    }
    o->is_cp = 1;
    o->cp_from = i;
    o->cp_len = 1;
    return 1;
}

/* Append one output chunk: leading ASCII spaces dropped when ``*prev_space``, then spaces escaped. */
static int emit(const Normalizer *nz, const Text *t, const Out *o, int *prev_space, ByteBuf *out) {
    Py_ssize_t max = o->is_cp ? o->cp_len * 4 : o->rep_len * 3;
    if (bytes_reserve(out, max + 8) < 0) return E_NOMEM;
    unsigned char *w = out->v + out->n;
    unsigned char *start = w;
    int skipping = *prev_space;
    unsigned char last = 0;
    Py_ssize_t len = o->is_cp ? o->cp_len : o->rep_len;
    for (Py_ssize_t k = 0; k < len; k++) {
        Py_UCS4 c = o->is_cp ? PyUnicode_READ(t->kind, t->data, o->cp_from + k) : (unsigned char)o->rep[k];
        if (skipping && c == ' ') continue;
        skipping = 0;
        last = c == ' ' ? ' ' : 1;
        if (c == ' ' && nz->escape_whitespaces) {
            *w++ = 0xE2;
            *w++ = 0x96;
            *w++ = 0x81;
        } else if (o->is_cp) {
            w += utf8_put(w, c);
        } else {
            *w++ = (unsigned char)c;
        }
    }
    if (w != start) *prev_space = last == ' ';
    out->n = w - out->v;
    return 0;
}

static int out_is_space(const Out *o, const Text *t) {
    if (o->is_cp) return o->cp_len == 1 && PyUnicode_READ(t->kind, t->data, o->cp_from) == ' ';
    return o->rep_len == 1 && o->rep[0] == ' ';
}

/* The first UTF-8 byte of code point d (0 for 0: the end of the text). */
static inline uint32_t first_byte(Py_UCS4 d) {
    return d < 0x80 ? d : d < 0x800 ? 0xC0 | (d >> 6) : d < 0x10000 ? 0xE0 | (d >> 12) : 0xF0 | (d >> 18);
}

static inline int asc_continues(const Normalizer *nz, Py_UCS4 c, Py_UCS4 next) {
    uint32_t b = first_byte(next);
    return (int)((nz->asc_cont[c][b >> 6] >> (b & 63)) & 1);
}

/* The normalized text (UTF-8, appended to ``out``), as ``SentencePieceNormalizer.chunks`` joined; with ``lab``
 * (which must cover ``out`` so far), each character's label too. */
static int normalize(const Normalizer *nz, const Text *t, ByteBuf *out, LabBuf *lab) {
    Py_ssize_t n = t->n, i = 0;
    int remove = nz->remove_extra_whitespaces;
    const unsigned char *ws = nz->escape_whitespaces ? (const unsigned char *)"\xE2\x96\x81" : (const unsigned char *)" ";
    Py_ssize_t wsn = nz->escape_whitespaces ? 3 : 1;
    Py_ssize_t begin = out->n;
    Out o;
    if (remove) {
        while (i < n) {
            Py_ssize_t used = nz->plain ? (o.is_cp = 1, o.cp_from = i, o.cp_len = 1, 1) : norm_prefix(nz, t, i, &o);
            if (!out_is_space(&o, t)) break;
            i += used;
        }
    }
    if (i >= n) return 0;
    if (bytes_reserve(out, (n - i) + 16) < 0) return E_NOMEM;
    if (nz->add_dummy_prefix && !nz->treat_whitespace_as_suffix) {
        memcpy(out->v + out->n, ws, (size_t)wsn);
        out->n += wsn;
    }
    int prev_space = remove;
    while (i < n) {
        if (lab && labs_sync(lab, out) < 0) return E_NOMEM; /* what the last step wrote */
        /* a run of characters the charsmap leaves alone, copied in one go: ASCII characters and spaces that no
         * key continues with the next character (a space as in ``emit``: dropped after a space when extra
         * whitespace is removed, else written escaped), and characters that start no key */
        if (nz->asc_simple_any) {
            if (bytes_reserve(out, 4 * (n - i) + 8) < 0) return E_NOMEM;
            if (lab && labs_reserve(lab, n - i + 8) < 0) return E_NOMEM;
            unsigned char *w = out->v + out->n;
            uint16_t *lw = lab ? lab->v + lab->n : NULL;
            const Labeler *lof = lab ? lab->of : NULL;
            const uint16_t wsl = lab ? labeler_of(lof, nz->escape_whitespaces ? 0x2581 : ' ') : 0;
            const uint8_t *plain = nz->plain_cp;
            const int32_t *after = nz->bmp_after, *leaf = nz->bmp_leaf;
#define COPY_RUN(TYPE, LABEL, WSLABEL)                                                                          \
    do {                                                                                                        \
        const TYPE *d = (const TYPE *)t->data;                                                                  \
        while (i < n) {                                                                                         \
            Py_UCS4 c = d[i];                                                                                   \
            if (c < 0x80) {                                                                                     \
                if (!nz->asc_run[c] || asc_continues(nz, c, i + 1 < n ? d[i + 1] : 0)) break;                  \
                if (!nz->asc_space[c]) {                                                                        \
                    *w++ = (unsigned char)c;                                                                    \
                    LABEL;                                                                                      \
                    prev_space = 0;                                                                             \
                } else {                                                                                        \
                    if (!prev_space) {                                                                          \
                        memcpy(w, ws, (size_t)wsn);                                                             \
                        w += wsn;                                                                               \
                        WSLABEL;                                                                                \
                    }                                                                                           \
                    prev_space = remove;                                                                        \
                }                                                                                               \
            } else {                                                                                            \
                if (c >= 0x110000 || !((plain[c >> 3] >> (c & 7)) & 1)) {                                      \
                    /* a key starts with c but c is none and the next character continues none: c */           \
                    if (c >= 0x10000 || !after || after[c] < 0 || leaf[c] >= 0) break;                          \
                    uint32_t b0 = i + 1 < n ? first_byte(d[i + 1]) : 0, t2 = (uint32_t)after[c] ^ b0;          \
                    if (b0 != 0 && (Py_ssize_t)t2 < nz->n_units && (nz->units[t2] & 0x800000FFu) == b0) break; \
                }                                                                                               \
                w += utf8_put(w, c);                                                                            \
                LABEL;                                                                                          \
                prev_space = 0;                                                                                 \
            }                                                                                                   \
            i++;                                                                                                \
        }                                                                                                       \
    } while (0)
#define L_PUT (*lw++ = labeler_of(lof, c))
#define L_WS (*lw++ = wsl)
            if (lab) {
                if (t->kind == PyUnicode_1BYTE_KIND) COPY_RUN(Py_UCS1, L_PUT, L_WS);
                else if (t->kind == PyUnicode_2BYTE_KIND) COPY_RUN(Py_UCS2, L_PUT, L_WS);
                else COPY_RUN(Py_UCS4, L_PUT, L_WS);
            } else {
                if (t->kind == PyUnicode_1BYTE_KIND) COPY_RUN(Py_UCS1, (void)0, (void)0);
                else if (t->kind == PyUnicode_2BYTE_KIND) COPY_RUN(Py_UCS2, (void)0, (void)0);
                else COPY_RUN(Py_UCS4, (void)0, (void)0);
            }
#undef L_PUT
#undef L_WS
#undef COPY_RUN
            out->n = w - out->v;
            if (lab) {
                lab->n = lw - lab->v;
                lab->done = out->n;
            }
            if (i >= n) break;
        }
        Py_UCS4 c = PyUnicode_READ(t->kind, t->data, i);
        if (c >= 0xD800 && c <= 0xDFFF) return E_SURROGATE; /* (the copy loop stops at one too): see prepare */
        if (c < 0x80 && c > 0 && nz->asc_fast[c]) {
            Py_UCS4 d = i + 1 < n ? PyUnicode_READ(t->kind, t->data, i + 1) : 0;
            if (!asc_continues(nz, c, d)) {
                const char *rep = nz->asc_rep[c];
                if (rep == NULL && c != ' ') { /* the common case: copied as it is */
                    if (bytes_reserve(out, 8) < 0) return E_NOMEM;
                    out->v[out->n++] = (unsigned char)c;
                    prev_space = 0;
                    i++;
                    continue;
                }
                if (rep == NULL) {
                    o.is_cp = 1;
                    o.cp_from = i;
                    o.cp_len = 1;
                } else {
                    o.is_cp = 0;
                    o.rep = rep;
                    o.rep_len = (Py_ssize_t)strlen(rep);
                }
                if (emit(nz, t, &o, &prev_space, out) < 0) return E_NOMEM;
                i++;
                if (!remove) prev_space = 0;
                continue;
            }
        }
        if (c >= 0x80 && c < 0x110000 && ((nz->plain_cp[c >> 3] >> (c & 7)) & 1)) { /* copied as it is */
            if (bytes_reserve(out, 8) < 0) return E_NOMEM;
            out->n += utf8_put(out->v + out->n, c);
            prev_space = 0;
            i++;
            continue;
        }
        if (c >= 0x80 && c < 0x10000 && nz->bmp_after && nz->bmp_after[c] >= 0) {
            uint32_t id = (uint32_t)nz->bmp_after[c];
            int cont = 0;
            if (i + 1 < n) {
                Py_UCS4 d = PyUnicode_READ(t->kind, t->data, i + 1);
                uint32_t b0 = d < 0x80 ? d : d < 0x800 ? 0xC0 | (d >> 6) : d < 0x10000 ? 0xE0 | (d >> 12) : 0xF0 | (d >> 18);
                uint32_t t2 = id ^ b0;
                cont = b0 != 0 && (Py_ssize_t)t2 < nz->n_units && (nz->units[t2] & 0x800000FFu) == b0;
            }
            if (!cont) { /* the longest key here is c itself, or there is none */
                int32_t leaf = nz->bmp_leaf[c];
                if (leaf < 0) {
                    if (bytes_reserve(out, 8) < 0) return E_NOMEM;
                    out->n += utf8_put(out->v + out->n, c);
                    prev_space = 0;
                } else {
                    o.is_cp = 0;
                    o.rep = nz->pool + leaf;
                    o.rep_len = (Py_ssize_t)strlen(o.rep);
                    if (emit(nz, t, &o, &prev_space, out) < 0) return E_NOMEM;
                    if (!remove) prev_space = 0;
                }
                i++;
                continue;
            }
        }
        Py_ssize_t used;
        if (nz->plain) {
            o.is_cp = 1;
            o.cp_from = i;
            o.cp_len = 1;
            used = 1;
        } else {
            used = norm_prefix(nz, t, i, &o);
        }
        if (emit(nz, t, &o, &prev_space, out) < 0) return E_NOMEM;
        i += used;
        if (!remove) prev_space = 0;
    }
    if (lab && labs_sync(lab, out) < 0) return E_NOMEM;
    if (remove) {
        while (out->n - begin >= wsn && memcmp(out->v + out->n - wsn, ws, (size_t)wsn) == 0) {
            out->n -= wsn;
            if (lab) { /* one character, one label */
                lab->n--;
                lab->done = out->n;
            }
        }
    }
    if (nz->add_dummy_prefix && nz->treat_whitespace_as_suffix) {
        if (bytes_reserve(out, wsn) < 0) return E_NOMEM;
        memcpy(out->v + out->n, ws, (size_t)wsn);
        out->n += wsn;
    }
    if (lab && labs_sync(lab, out) < 0) return E_NOMEM;
    return 0;
}

/* The text normalized by ``nz`` (NULL: as UTF-8) into ``out``, lone surrogates as U+FFFD first: read as it is,
 * and scrubbed (``t->scrubbed``, the caller frees it) and read again only when a surrogate turns up (both
 * readers stop at the first one; a surrogate is in no charsmap key and no user-defined piece, so every one is
 * met where a character starts). */
static int prepare(const Normalizer *nz, Text *t, ByteBuf *out, LabBuf *lab) {
    Py_ssize_t begin = out->n, lab_begin = lab ? lab->n : 0;
    int rc = nz ? normalize(nz, t, out, lab) : text_utf8(t, out);
    if (rc != E_SURROGATE) return rc;
    out->n = begin;
    if (lab) {
        lab->n = lab_begin;
        lab->done = begin;
    }
    rc = text_scrub(t);
    if (rc == 0) rc = nz ? normalize(nz, t, out, lab) : text_utf8(t, out);
    return rc;
}

/* Normalizer(charsmap: bytes, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces,
 *            treat_whitespace_as_suffix, user_defined: list[str]) */
static PyObject *Normalizer_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Py_buffer blob;
    int dummy, remove, escape, suffix;
    PyObject *user;
    static char *kwlist[] = {"charsmap", "add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces",
                             "treat_whitespace_as_suffix", "user_defined", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*ppppO!", kwlist, &blob, &dummy, &remove, &escape, &suffix,
                                     &PyList_Type, &user))
        return NULL;
    Normalizer *self = (Normalizer *)type->tp_alloc(type, 0);
    if (!self) {
        PyBuffer_Release(&blob);
        return NULL;
    }
    self->add_dummy_prefix = dummy;
    self->remove_extra_whitespaces = remove;
    self->escape_whitespaces = escape;
    self->treat_whitespace_as_suffix = suffix;
    if (blob.len > 0) {
        const unsigned char *b = (const unsigned char *)blob.buf;
        if (blob.len < 4) goto bad;
        uint32_t trie = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
        if (trie % 4 || trie < 4 || (Py_ssize_t)trie + 4 > blob.len) goto bad;
        self->n_units = trie / 4;
        self->units = (uint32_t *)malloc(trie);
        self->pool_len = blob.len - 4 - trie;
        self->pool = (char *)malloc((size_t)self->pool_len + 1);
        if (!self->units || !self->pool) goto nomem;
        for (Py_ssize_t k = 0; k < self->n_units; k++) {
            const unsigned char *p = b + 4 + 4 * k;
            self->units[k] = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        }
        memcpy(self->pool, b + 4 + trie, (size_t)self->pool_len);
        self->pool[self->pool_len] = 0;
    }
    PyBuffer_Release(&blob);
    Py_ssize_t nu = PyList_GET_SIZE(user), total = 0;
    for (Py_ssize_t k = 0; k < nu; k++) {
        PyObject *s = PyList_GET_ITEM(user, k);
        if (!PyUnicode_Check(s) || PyUnicode_GET_LENGTH(s) == 0) {
            PyErr_SetString(PyExc_TypeError, "user_defined must be non-empty str");
            goto fail;
        }
        total += PyUnicode_GET_LENGTH(s);
    }
    if (nu) {
        self->user = (Py_UCS4 *)malloc((size_t)(total + 1) * sizeof(Py_UCS4));
        self->user_start = (Py_ssize_t *)malloc((size_t)nu * sizeof(Py_ssize_t));
        self->user_len = (Py_ssize_t *)malloc((size_t)nu * sizeof(Py_ssize_t));
        self->user_first = (uint8_t *)calloc(0x110000 / 8, 1);
        if (!self->user || !self->user_start || !self->user_len || !self->user_first) goto nomem;
        /* longest first (insertion sort by length; the list is short) */
        Py_ssize_t *order = (Py_ssize_t *)malloc((size_t)nu * sizeof(Py_ssize_t));
        if (!order) goto nomem;
        for (Py_ssize_t k = 0; k < nu; k++) {
            Py_ssize_t len = PyUnicode_GET_LENGTH(PyList_GET_ITEM(user, k)), j = k;
            while (j > 0 && PyUnicode_GET_LENGTH(PyList_GET_ITEM(user, order[j - 1])) < len) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = k;
        }
        Py_ssize_t at = 0;
        for (Py_ssize_t k = 0; k < nu; k++) {
            PyObject *s = PyList_GET_ITEM(user, order[k]);
            Py_ssize_t len = PyUnicode_GET_LENGTH(s);
            if (!PyUnicode_AsUCS4(s, self->user + at, len, 0)) {
                free(order);
                goto fail;
            }
            self->user_start[k] = at;
            self->user_len[k] = len;
            Py_UCS4 c = self->user[at];
            self->user_first[c >> 3] |= (uint8_t)(1u << (c & 7));
            at += len;
        }
        free(order);
        self->n_user = nu;
    }
    self->plain = self->units == NULL && self->n_user == 0;
    self->plain_cp = (uint8_t *)calloc(0x110000 / 8, 1);
    if (!self->plain_cp) {
        PyErr_NoMemory();
        goto fail;
    }
    if (self->units) {
        self->bmp_after = (int32_t *)malloc(0x10000 * sizeof(int32_t));
        self->bmp_leaf = (int32_t *)malloc(0x10000 * sizeof(int32_t));
        if (!self->bmp_after || !self->bmp_leaf) {
            PyErr_NoMemory();
            goto fail;
        }
        memset(self->bmp_after, 0xFF, 0x10000 * sizeof(int32_t));
        memset(self->bmp_leaf, 0xFF, 0x10000 * sizeof(int32_t));
    }
    for (uint32_t c = 0x80; c < 0x110000; c++) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        if (self->user_first && (self->user_first[c >> 3] >> (c & 7)) & 1) continue;
        int starts = 0;
        if (self->units) {
            unsigned char enc[4];
            int k = utf8_put(enc, c);
            uint32_t id = da_offset(self->units[0]), unit = 0;
            starts = 1;
            int whole = 1;
            for (int b = 0; b < k; b++) {
                id ^= enc[b];
                if ((Py_ssize_t)id >= self->n_units || (self->units[id] & 0x800000FFu) != enc[b]) {
                    starts = 0;
                    break;
                }
                unit = self->units[id];
                id ^= da_offset(unit);
                if ((Py_ssize_t)id >= self->n_units) { /* malformed: keep the careful path */
                    whole = 0;
                    break;
                }
            }
            if (starts && whole && c < 0x10000) {
                self->bmp_after[c] = (int32_t)id;
                if ((unit >> 8) & 1) {
                    uint32_t value = self->units[id] & 0x7FFFFFFFu;
                    if ((Py_ssize_t)value < self->pool_len &&
                        memchr(self->pool + value, 0, (size_t)(self->pool_len - value)))
                        self->bmp_leaf[c] = (int32_t)value;
                }
            }
        }
        if (!starts) self->plain_cp[c >> 3] |= (uint8_t)(1u << (c & 7));
    }
    for (int c = 1; c < 128; c++) {
        self->asc_fast[c] = !(self->user_first && (self->user_first[c >> 3] >> (c & 7)) & 1);
        if (!self->units) continue;
        const uint32_t *u = self->units;
        uint32_t id = da_offset(u[0]) ^ (uint32_t)c;
        if ((Py_ssize_t)id >= self->n_units || (u[id] & 0x800000FFu) != (uint32_t)c) continue; /* no key */
        uint32_t unit = u[id];
        id ^= da_offset(unit);
        if ((Py_ssize_t)id >= self->n_units) {
            self->asc_fast[c] = 0;
            continue;
        }
        if ((unit >> 8) & 1) {
            uint32_t value = u[id] & 0x7FFFFFFFu;
            if ((Py_ssize_t)value < self->pool_len &&
                memchr(self->pool + value, 0, (size_t)(self->pool_len - value)))
                self->asc_rep[c] = self->pool + value;
        }
        for (uint32_t d = 1; d < 256; d++) {
            uint32_t t = id ^ d;
            if ((Py_ssize_t)t < self->n_units && (u[t] & 0x800000FFu) == d)
                self->asc_cont[c][d >> 6] |= (uint64_t)1 << (d & 63);
        }
    }
    for (int c = 0; c < 128; c++) {
        self->asc_simple[c] = c != 0 && c != ' ' && self->asc_fast[c] && self->asc_rep[c] == NULL;
        self->asc_space[c] = c != 0 && self->asc_fast[c] &&
                             ((c == ' ' && self->asc_rep[c] == NULL) ||
                              (self->asc_rep[c] != NULL && strcmp(self->asc_rep[c], " ") == 0));
        self->asc_run[c] = self->asc_simple[c] || self->asc_space[c];
        self->asc_simple_any |= self->asc_simple[c];
    }
    return (PyObject *)self;
bad:
    PyBuffer_Release(&blob);
    PyErr_SetString(PyExc_ValueError, "malformed precompiled charsmap");
    Py_DECREF(self);
    return NULL;
nomem:
    PyBuffer_Release(&blob);
    PyErr_NoMemory();
fail:
    Py_DECREF(self);
    return NULL;
}

static int text_open(PyObject *s, Text *t) {
    t->kind = PyUnicode_KIND(s);
    t->data = PyUnicode_DATA(s);
    t->n = PyUnicode_GET_LENGTH(s);
    t->scrubbed = NULL;
    return 0;
}

PyDoc_STRVAR(normalize_doc, "normalize(text) -> str: the normalized text (lone surrogates as U+FFFD first).");

static PyObject *Normalizer_normalize(Normalizer *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Text t;
    text_open(arg, &t);
    ByteBuf out = {NULL, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = prepare(self, &t, &out, NULL);
    Py_END_ALLOW_THREADS free(t.scrubbed);
    if (rc < 0) {
        free(out.v);
        return PyErr_NoMemory();
    }
    PyObject *res = PyUnicode_DecodeUTF8((const char *)(out.v ? out.v : (unsigned char *)""), out.n, "strict");
    free(out.v);
    return res;
}

static PyMethodDef Normalizer_methods[] = {
    {"normalize", (PyCFunction)Normalizer_normalize, METH_O, normalize_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject NormalizerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._unigram.Normalizer",
    .tp_basicsize = sizeof(Normalizer),
    .tp_dealloc = (destructor)Normalizer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SentencePiece's normalizer: Normalizer(charsmap, add_dummy_prefix, remove_extra_whitespaces, "
              "escape_whitespaces, treat_whitespace_as_suffix, user_defined).",
    .tp_methods = Normalizer_methods,
    .tp_new = Normalizer_new,
};

/* ---- the piece trie (double array over character labels) ------------------------------------------------------
 *
 * Characters are labels 1..alpha, the most frequent in the pieces first (0: a character no piece has), so a
 * step of a walk is one character, and most nodes' children sit close together. */

typedef struct {
    int32_t base;  /* child with label c at base + c */
    int32_t check; /* parent index; -1: free */
    int32_t id;    /* piece ending here, -1: none */
    float score;   /* its float32 score */
} Unit;

typedef struct {
    const int32_t *s; /* labels */
    int32_t len;
    int32_t id;
} Key;

typedef struct {
    Unit *u;
    int32_t cap;
    int32_t *next, *prev; /* free list (doubly linked) of candidate first-child slots */
    uint8_t *fails;
    int32_t head, tail;
    int32_t top; /* highest slot in use */
    const float *fscore;
    int32_t alpha;      /* highest label */
    int *labels;        /* scratch: a node's child labels (alpha + 1) */
    Py_ssize_t *from;   /* and where their keys start (alpha + 2) */
} Builder;

static int cmp_key(const void *a, const void *b) {
    const Key *x = (const Key *)a, *y = (const Key *)b;
    int32_t n = x->len < y->len ? x->len : y->len;
    for (int32_t i = 0; i < n; i++)
        if (x->s[i] != y->s[i]) return x->s[i] < y->s[i] ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

static void fl_unlink(Builder *b, int32_t t) {
    int32_t p = b->prev[t], n = b->next[t];
    if (p == -2) return; /* not linked */
    if (p >= 0) b->next[p] = n; else b->head = n;
    if (n >= 0) b->prev[n] = p; else b->tail = p;
    b->prev[t] = -2;
}

static int grow(Builder *b, int32_t need) {
    if (need < b->cap) return 0;
    int64_t cap = b->cap < 256 ? 256 : b->cap;
    while (cap <= need) cap *= 2;
    if (cap > INT32_MAX / 2) return E_NOMEM;
    Unit *u = (Unit *)realloc(b->u, (size_t)cap * sizeof(Unit));
    if (!u) return E_NOMEM;
    b->u = u;
    int32_t *nx = (int32_t *)realloc(b->next, (size_t)cap * sizeof(int32_t));
    if (!nx) return E_NOMEM;
    b->next = nx;
    int32_t *pv = (int32_t *)realloc(b->prev, (size_t)cap * sizeof(int32_t));
    if (!pv) return E_NOMEM;
    b->prev = pv;
    uint8_t *f = (uint8_t *)realloc(b->fails, (size_t)cap);
    if (!f) return E_NOMEM;
    b->fails = f;
    for (int32_t t = b->cap; t < (int32_t)cap; t++) {
        b->u[t].base = 0;
        b->u[t].check = -1;
        b->u[t].id = -1;
        b->u[t].score = 0.0f;
        b->fails[t] = 0;
        b->next[t] = -1;
        b->prev[t] = b->tail;
        if (b->tail >= 0) b->next[b->tail] = t; else b->head = t;
        b->tail = t;
    }
    b->cap = (int32_t)cap;
    return 0;
}

/* A base for a node with children ``labels[0..k)`` (ascending): every base + label free, base >= 1. */
static int32_t find_base(Builder *b, const int *labels, int k) {
    int32_t f = b->head;
    for (;;) {
        if (f < 0) {
            int32_t old = b->cap;
            if (grow(b, b->cap) < 0) return E_NOMEM;
            f = old;
            continue;
        }
        int32_t base = f - labels[0];
        int32_t nf = b->next[f];
        if (base >= 1) {
            if (grow(b, base + b->alpha + 1) < 0) return E_NOMEM;
            int ok = 1;
            for (int j = 1; j < k && ok; j++) ok = b->u[base + labels[j]].check == -1;
            if (ok) return base;
        }
        if (++b->fails[f] >= 64) fl_unlink(b, f); /* a crowded slot: stop trying it as a first child */
        if (nf < 0 && b->next[f] >= 0) nf = b->next[f];
        f = nf;
    }
}

/* Nodes waiting to be placed, depth first (a stack; measured faster to walk than breadth first: a walk's path
 * stays close together). */
typedef struct {
    int32_t s, depth;
    Py_ssize_t lo, hi;
} Pending;

typedef struct {
    Pending *v;
    Py_ssize_t head, n, cap;
} Queue;

static int queue_push(Queue *q, int32_t s, Py_ssize_t lo, Py_ssize_t hi, int32_t depth) {
    if (q->n == q->cap) {
        Py_ssize_t cap = q->cap ? q->cap * 2 : 1024;
        Pending *nv = (Pending *)realloc(q->v, (size_t)cap * sizeof(Pending));
        if (!nv) return E_NOMEM;
        q->v = nv;
        q->cap = cap;
    }
    Pending *p = &q->v[q->n++];
    p->s = s;
    p->lo = lo;
    p->hi = hi;
    p->depth = depth;
    return 0;
}

/* Node ``s`` for keys[lo:hi) (sorted, sharing their first ``depth`` bytes): its piece, then its children placed
 * and queued. */
static int build_node(Builder *b, Queue *q, const Key *keys, int32_t s, Py_ssize_t lo, Py_ssize_t hi, int32_t depth) {
    if (lo < hi && keys[lo].len == depth) {
        b->u[s].id = keys[lo].id;
        b->u[s].score = b->fscore[keys[lo].id];
        lo++;
        while (lo < hi && keys[lo].len == depth) lo++; /* a repeated key keeps the first (callers pass none) */
    }
    if (lo >= hi) {
        b->u[s].base = 0;
        return 0;
    }
    int *labels = b->labels;
    Py_ssize_t *from = b->from;
    int k = 0;
    for (Py_ssize_t r = lo; r < hi; r++) {
        int c = keys[r].s[depth];
        if (k == 0 || labels[k - 1] != c) {
            labels[k] = c;
            from[k] = r;
            k++;
        }
    }
    from[k] = hi;
    int32_t base = find_base(b, labels, k);
    if (base < 0) return E_NOMEM;
    b->u[s].base = base;
    for (int j = 0; j < k; j++) {
        int32_t t = base + labels[j];
        fl_unlink(b, t);
        b->u[t].check = s;
        b->u[t].id = -1;
        if (t > b->top) b->top = t;
    }
    for (int j = k - 1; j >= 0; j--)
        if (queue_push(q, base + labels[j], from[j], from[j + 1], depth + 1) < 0) return E_NOMEM;
    return 0;
}

static int build_trie(Builder *b, const Key *keys, Py_ssize_t n) {
    Queue q = {NULL, 0, 0, 0};
    int rc = queue_push(&q, 0, 0, n, 0);
    while (rc == 0 && q.n > 0) {
        Pending p = q.v[--q.n];
        rc = build_node(b, &q, keys, p.s, p.lo, p.hi, p.depth);
    }
    free(q.v);
    return rc;
}

/* ---- the model ---------------------------------------------------------------------------------------------- */

/* The trie as walked: 12 bytes a unit (a hot walk touches fewer cache lines); the piece's id sits aside. */
typedef struct {
    int32_t base;  /* child with label c at base + c */
    int32_t check; /* parent index (negative: free or root) */
    float score;   /* the piece ending here (float32 score), NaN: none */
} Cell;

typedef struct {
    PyObject_HEAD
    Cell *u;            /* the trie; root at 0 */
    int32_t *id_of;     /* unit -> piece id, -1: none */
    int32_t n_units;
    double *dscore;     /* id -> score (double arithmetic) */
    int32_t n_ids;
    int float32;
    float unk_f;
    double unk_d;
    int32_t unk_id;     /* -1: none */
    int byte_fallback;
    int whole_lookup;   /* an unknown run that spells a piece is that piece (Hugging Face) */
    int32_t bytes[256]; /* <0xNN> ids, -1 when absent */
    uint16_t *label_bmp; /* BMP code point -> label (0: in no piece) */
    uint32_t *astral;   /* the other code points of the pieces, ascending, with their labels aside */
    uint16_t *astral_label;
    Py_ssize_t n_astral;
    WordCache *cache;   /* the word cache (float32 models whose pieces allow it), NULL: none */
    uint8_t *seen;      /* with it: a bit per word hash, set at a word's first occurrence (see word_seen) */
    uint16_t sp_label;  /* the label of U+2581 (words start there) */
    double smax;        /* the largest |float32 score| of a piece or of the unknown node */
    Labeler labeler;    /* label_bmp and astral, for the normalizer */
    int words_possible; /* the word cache may be used (its conditions above, cache_size aside) */
    int finite;         /* float32, and every piece's score and the unknown score below 1e30 in magnitude: every
                         * candidate is then finite (|base| <= 100,000), so a record's first candidate is the first
                         * one greater than its initial -inf, and the search needs no "unset" test */
} Model;

/* One entry of the word cache (see "words" below): a word's labels, its best path and when it may be reused. */
#define UW_KEY 20   /* labels: longer words are always searched */
#define UW_PIECES 7 /* pieces: a word whose path has more is searched every time */
#define SEEN_BYTES 8192 /* the first-occurrence bits (see word_seen) */

typedef struct {
    WCHead h;   /* h.len: labels of the word, h.count: pieces of its path */
    float eps;  /* reused only when the error bound of one float32 addition is below this (0: never) */
    float lo, hi; /* the exact best scores at the word's interior positions lie in [lo, hi] (start = 0) */
    uint16_t key[UW_KEY];
    uint8_t plen[UW_PIECES]; /* characters of each piece of the path */
    int32_t id[UW_PIECES];   /* their ids (UNK_MARK: an unknown character) */
    float score[UW_PIECES];  /* and their float32 scores */
    uint32_t pad;
} UWSlot;
_Static_assert(sizeof(UWSlot) == 128, "a word cache slot is two cache lines");

static inline int32_t label_of(const Model *m, uint32_t c) {
    if (c < 0x10000) return m->label_bmp[c];
    Py_ssize_t lo = 0, hi = m->n_astral;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (m->astral[mid] < c) lo = mid + 1; else hi = mid;
    }
    return lo < m->n_astral && m->astral[lo] == c ? m->astral_label[lo] : 0;
}

static void Model_dealloc(Model *self) {
    free(self->u);
    free(self->id_of);
    free(self->dscore);
    free(self->label_bmp);
    free(self->astral);
    free(self->astral_label);
    wc_free(self->cache);
    free(self->seen);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Model(pieces: list[str], ids: list[int], scores: list[float], n_ids: int, unk_id: int, unk_score: float,
 *       byte_fallback: bool, float32: bool, byte_ids: list[int], whole_lookup: bool, cache_size: int = 0) */
static PyObject *Model_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *pieces, *ids, *scores, *byte_ids;
    int n_ids, unk_id, byte_fallback, float32, whole;
    double unk_score;
    Py_ssize_t cache_size = 0;
    static char *kwlist[] = {"pieces", "ids", "scores", "n_ids", "unk_id", "unk_score", "byte_fallback",
                             "float32", "byte_ids", "whole_lookup", "cache_size", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!iidppO!p|n", kwlist, &PyList_Type, &pieces, &PyList_Type,
                                     &ids, &PyList_Type, &scores, &n_ids, &unk_id, &unk_score, &byte_fallback,
                                     &float32, &PyList_Type, &byte_ids, &whole, &cache_size))
        return NULL;
    if (cache_size < 0 || cache_size > ((Py_ssize_t)1 << 24)) {
        PyErr_SetString(PyExc_ValueError, "cache_size must be in 0..2**24");
        return NULL;
    }
    Py_ssize_t np = PyList_GET_SIZE(pieces);
    if (PyList_GET_SIZE(ids) != np || PyList_GET_SIZE(scores) != np || PyList_GET_SIZE(byte_ids) != 256 ||
        n_ids < 0) {
        PyErr_SetString(PyExc_ValueError, "pieces, ids and scores must have one entry each; byte_ids 256");
        return NULL;
    }
    Model *self = (Model *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->float32 = float32;
    self->unk_id = unk_id;
    self->unk_d = unk_score;
    self->unk_f = (float)unk_score;
    self->byte_fallback = byte_fallback;
    self->whole_lookup = whole;
    self->n_ids = n_ids;
    Key *keys = NULL;
    int32_t *text = NULL;
    float *fscore = NULL;
    uint32_t *count = NULL, *order = NULL;
    Builder b = {NULL, 0, NULL, NULL, NULL, -1, -1, 0, NULL, 0, NULL, NULL};
    for (int k = 0; k < 256; k++) {
        long v = PyLong_AsLong(PyList_GET_ITEM(byte_ids, k));
        if (v == -1 && PyErr_Occurred()) goto fail;
        self->bytes[k] = (v < 0 || v >= n_ids) ? -1 : (int32_t)v;
    }
    self->dscore = (double *)calloc((size_t)n_ids + 1, sizeof(double));
    fscore = (float *)calloc((size_t)n_ids + 1, sizeof(float));
    keys = (Key *)malloc(((size_t)np + 1) * sizeof(Key));
    count = (uint32_t *)calloc(0x110000, sizeof(uint32_t));
    if (!self->dscore || !fscore || !keys || !count) goto nomem;
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < np; k++) {
        PyObject *s = PyList_GET_ITEM(pieces, k);
        if (!PyUnicode_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "pieces must be str");
            goto fail;
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(s);
        if (len == 0 || len > MAX_PIECE) {
            PyErr_SetString(PyExc_ValueError, "empty or too long piece");
            goto fail;
        }
        int kind = PyUnicode_KIND(s);
        const void *data = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < len; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c >= 0xD800 && c <= 0xDFFF) {
                PyErr_SetString(PyExc_ValueError, "surrogate code point in a piece");
                goto fail;
            }
            count[c]++;
        }
        total += len;
    }
    /* labels by frequency, most frequent first (ties: lower code point first) */
    Py_ssize_t alpha = 0;
    for (uint32_t c = 0; c < 0x110000; c++) alpha += count[c] > 0;
    if (alpha > 65535) {
        PyErr_SetString(PyExc_ValueError, "more than 65535 distinct characters in the pieces");
        goto fail;
    }
    order = (uint32_t *)malloc(((size_t)alpha + 1) * sizeof(uint32_t));
    self->label_bmp = (uint16_t *)calloc(0x10000, sizeof(uint16_t));
    if (!order || !self->label_bmp) goto nomem;
    {
        Py_ssize_t k = 0;
        for (uint32_t c = 0; c < 0x110000; c++)
            if (count[c]) order[k++] = c;
        /* sort code points by count descending (a simple merge-free approach: qsort on packed keys) */
        uint64_t *packed = (uint64_t *)malloc(((size_t)alpha + 1) * sizeof(uint64_t));
        if (!packed) goto nomem;
        for (Py_ssize_t j = 0; j < alpha; j++)
            packed[j] = ((uint64_t)(UINT32_MAX - count[order[j]]) << 32) | order[j];
        qsort(packed, (size_t)alpha, sizeof(uint64_t), cmp_u64);
        Py_ssize_t n_astral = 0;
        for (Py_ssize_t j = 0; j < alpha; j++) {
            uint32_t c = (uint32_t)(packed[j] & 0xFFFFFFFFu);
            count[c] = (uint32_t)(j + 1); /* count now holds the label */
            if (c < 0x10000) self->label_bmp[c] = (uint16_t)(j + 1); else n_astral++;
        }
        free(packed);
        self->astral = (uint32_t *)malloc(((size_t)n_astral + 1) * sizeof(uint32_t));
        self->astral_label = (uint16_t *)malloc(((size_t)n_astral + 1) * sizeof(uint16_t));
        if (!self->astral || !self->astral_label) goto nomem;
        Py_ssize_t q = 0;
        for (uint32_t c = 0x10000; c < 0x110000; c++)
            if (count[c]) {
                self->astral[q] = c;
                self->astral_label[q++] = (uint16_t)count[c];
            }
        self->n_astral = n_astral;
        self->labeler = (Labeler){self->label_bmp, self->astral, self->astral_label, n_astral};
    }
    text = (int32_t *)malloc(((size_t)total + 1) * sizeof(int32_t));
    if (!text) goto nomem;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < np; k++) {
        PyObject *s = PyList_GET_ITEM(pieces, k);
        long id = PyLong_AsLong(PyList_GET_ITEM(ids, k));
        double sc = PyFloat_AsDouble(PyList_GET_ITEM(scores, k));
        if (PyErr_Occurred()) goto fail;
        if (id < 0 || id >= n_ids) {
            PyErr_SetString(PyExc_ValueError, "piece id out of range");
            goto fail;
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(s);
        int kind = PyUnicode_KIND(s);
        const void *data = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < len; i++) text[at + i] = (int32_t)count[PyUnicode_READ(kind, data, i)];
        keys[k].s = text + at;
        keys[k].len = (int32_t)len;
        keys[k].id = (int32_t)id;
        at += len;
        self->dscore[id] = sc;
        fscore[id] = (float)sc;
    }
    b.alpha = (int32_t)alpha;
    b.labels = (int *)malloc(((size_t)alpha + 2) * sizeof(int));
    b.from = (Py_ssize_t *)malloc(((size_t)alpha + 3) * sizeof(Py_ssize_t));
    if (!b.labels || !b.from) goto nomem;
    qsort(keys, (size_t)np, sizeof(Key), cmp_key);
    b.fscore = fscore;
    b.cap = 0;
    if (grow(&b, 1024) < 0) goto nomem;
    fl_unlink(&b, 0);
    b.u[0].check = -2; /* the root */
    b.u[0].id = -1;
    if (build_trie(&b, keys, np) < 0) goto nomem;
    /* every base + alpha stays inside the array, so a step needs no bounds check */
    int32_t maxbase = 0;
    for (int32_t t = 0; t <= b.top; t++)
        if (b.u[t].check != -1 && b.u[t].base > maxbase) maxbase = b.u[t].base;
    int32_t n_units = (maxbase + b.alpha + 1 > b.top + 1 ? maxbase + b.alpha + 1 : b.top + 1);
    if (grow(&b, n_units) < 0) goto nomem;
    self->u = (Cell *)malloc((size_t)n_units * sizeof(Cell));
    self->id_of = (int32_t *)malloc((size_t)n_units * sizeof(int32_t));
    if (!self->u || !self->id_of) goto nomem;
    for (int32_t t = 0; t < n_units; t++) {
        self->u[t].base = b.u[t].base;
        self->u[t].check = b.u[t].check;
        self->u[t].score = b.u[t].id >= 0 ? b.u[t].score : NAN;
        self->id_of[t] = b.u[t].id;
    }
    self->n_units = n_units;
    /* The word cache (see "words" below) needs: float32 arithmetic, U+2581 in some piece, no piece with U+2581
     * after its first character, and finite scores (so every bound below is finite). */
    int words_ok = float32 && self->label_bmp[0x2581] != 0; /* (with any cache_size: Model.dump records it) */
    self->sp_label = self->label_bmp[0x2581];
    self->smax = fabs((double)self->unk_f);
    for (Py_ssize_t k = 0; k < np && words_ok; k++) {
        for (int32_t i = 1; i < keys[k].len; i++)
            if (keys[k].s[i] == self->sp_label) words_ok = 0;
        double a = fabs((double)fscore[keys[k].id]);
        if (a > self->smax) self->smax = a;
    }
    if (!(self->smax < 1e30)) words_ok = 0;
    self->words_possible = words_ok;
    words_ok = words_ok && cache_size > 0;
    self->finite = float32 && fabsf(self->unk_f) < 1e30f;
    for (Py_ssize_t k = 0; k < np && self->finite; k++) self->finite = fabsf(fscore[keys[k].id]) < 1e30f;
    if (words_ok && (!(self->cache = wc_new((size_t)cache_size, sizeof(UWSlot))) ||
                     !(self->seen = (uint8_t *)calloc(SEEN_BYTES, 1))))
        goto nomem;
    PyObject *result = (PyObject *)self;
    goto done;
nomem:
    PyErr_NoMemory();
fail:
    result = NULL;
done: /* the builder's scratch, on success and failure alike */
    free(b.u);
    free(b.next);
    free(b.prev);
    free(b.fails);
    free(b.labels);
    free(b.from);
    free(keys);
    free(text);
    free(fscore);
    free(count);
    free(order);
    if (!result) Py_DECREF(self);
    return result;
}

/* The piece spelled exactly by the labels lab[0:n] (-1: none). */
static int32_t exact(const Model *m, const uint16_t *lab, Py_ssize_t n) {
    const Cell *u = m->u;
    int32_t s = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (lab[k] == 0) return -1;
        int32_t t = u[s].base + lab[k];
        if (u[t].check != s) return -1;
        s = t;
    }
    return m->id_of[s];
}

/* The text of one call: UTF-8 bytes, and per character its label and byte offset. */
typedef struct {
    const unsigned char *buf;
    Py_ssize_t nb;       /* its bytes */
    const uint16_t *lab; /* per character */
    const int32_t *sp_at; /* with the word cache: the positions of U+2581 labels, ascending, then the length */
} Chars;

/* Ids of one unknown run, characters s..e, bytes bs..be (see the file comment). */
static int resolve_unknown(const Model *m, const Chars *c, Py_ssize_t s, Py_ssize_t e, Py_ssize_t bs, Py_ssize_t be,
                           IdBuf *out) {
    if (m->whole_lookup) {
        int32_t id = exact(m, c->lab + s, e - s);
        if (id >= 0) return ids_push(out, id);
    }
    if (m->byte_fallback) {
        const unsigned char *buf = c->buf;
        Py_ssize_t k;
        for (k = bs; k < be && m->bytes[buf[k]] >= 0; k++) {
        }
        if (k == be) {
            for (k = bs; k < be; k++)
                if (ids_push(out, m->bytes[buf[k]]) < 0) return E_NOMEM;
            return 0;
        }
    }
    if (m->unk_id < 0) return E_NO_UNK;
    return ids_push(out, m->unk_id);
}

/* Per character position of the text: the best path ending there (start -1: none yet). */
typedef struct {
    float score;
    int32_t start;
    int32_t node; /* piece id, or UNK_MARK */
} PosF;

typedef struct {
    double score;
    int32_t start;
    int32_t node;
} PosD;

/* The best path -> ids (unknown runs fused and resolved), appended to ``out``: the back pointers are followed
 * from the end, the ids written backwards (an unknown run's ids turned around as they come), then the whole
 * stretch turned around once.  Byte offsets (for byte fallback) are followed back from the end as far as needed. */
static int emit_path(const Model *m, const Chars *c, Py_ssize_t n, Py_ssize_t nb, char *pos, size_t stride,
                     IdBuf *out) {
#define P_START(e) (*(const int32_t *)(pos + (size_t)(e) * stride + stride - 2 * sizeof(int32_t)))
#define P_NODE(e) (*(const int32_t *)(pos + (size_t)(e) * stride + stride - sizeof(int32_t)))
    const unsigned char *buf = c->buf;
    Py_ssize_t first = out->n;
    Py_ssize_t kc = n, kb = nb; /* character kc starts at byte kb (followed back only as byte fallback needs) */
    int rc = 0;
    for (Py_ssize_t e = n; e > 0 && rc == 0;) {
        int32_t nd = P_NODE(e);
        Py_ssize_t s = P_START(e);
        if (nd != UNK_MARK) {
            /* a unit, or an id from the word cache (the caller reserved room for one id per character) */
            out->v[out->n++] = nd >= 0 ? m->id_of[nd] : -3 - nd;
            e = s;
            continue;
        }
        while (s > 0 && P_NODE(s) == UNK_MARK) s = P_START(s); /* fuse the run [s, e) */
        Py_ssize_t bs = 0, be = 0;
        if (m->byte_fallback) {
            for (; kc > e; kc--) do kb--; while ((buf[kb] & 0xC0) == 0x80);
            be = kb;
            for (; kc > s; kc--) do kb--; while ((buf[kb] & 0xC0) == 0x80);
            bs = kb;
        }
        Py_ssize_t at = out->n;
        rc = resolve_unknown(m, c, s, e, bs, be, out);
        for (Py_ssize_t i = at, j = out->n - 1; i < j; i++, j--) { /* forwards now, backwards with the rest */
            int32_t x = out->v[i];
            out->v[i] = out->v[j];
            out->v[j] = x;
        }
        e = s;
    }
    for (Py_ssize_t i = first, j = out->n - 1; i < j; i++, j--) {
        int32_t x = out->v[i];
        out->v[i] = out->v[j];
        out->v[j] = x;
    }
    return rc;
#undef P_START
#undef P_NODE
}

/* ---- words: the cache of whole words' best paths (float32 models) ---------------------------------------------
 *
 * Why a word is a sub-problem.  No piece has U+2581 after its first character (checked at build, else there is
 * no cache), and an unknown node covers one character, so no node of the lattice crosses the position just before
 * a U+2581: when the search reaches such a start p, every start before p has been processed, and they only reach
 * ends <= p.  So best[p] (call it B) is final, nothing past p has been touched, and the starts of the word [p, q)
 * (q: the next U+2581, or the end) reach exactly the ends p+1..q, through the pieces spelled by its labels alone.
 * The path the reference keeps therefore goes through q, and its part inside [p, q) is decided by the word's
 * labels and B only.  (The same holds at p = 0 with B = 0.)
 *
 * Why B matters, and when it does not.  In exact arithmetic the best path of the word would not depend on B.  The
 * reference adds float32s: every candidate at an end is fl(score + best[s]), with |fl(t) - t| <= u|t| + 2^-150
 * (u = 2^-24), and at another B the roundings differ.  Let x[s] be the exact best score of the word's lattice from
 * p to s (x[p] = 0) and y_j = score_j + x[s_j] the exact value of candidate j at an end.  With L = q - p characters,
 * |B| <= RESET (the reference re-bases before p otherwise) and S the largest |score|, every sum the reference forms
 * inside the word has |t| <= M = (|B| + L S) / (1 - L u), so each addition errs by at most eps(B) = u M + 2^-150.
 * By induction over ends (the max of values that each err by at most d errs by at most d):
 *   (1) best[s] <= B + x[s] + (s - p) eps   (any chain to s has at most s - p additions), and
 *   (2) best[s] >= B + x[s] - P_s eps       (P_s: the number of pieces of the exact best path to s, <= s - p),
 * and a candidate at end e lies within (e - p) eps of B + y_j.  At the end e_i of the i-th piece of the exact best
 * path, the reference keeps the exact winner j0 (strictly greater, so the tie order does not come in) if every
 * other candidate j has y_j0 - y_j > (i + (e_i - p)) eps: its sum is >= B + y_j0 - i eps by (2), the other's
 * <= B + y_j + (e_i - p) eps by (1).  So with m_i = y_j0 - max_{j != j0} y_j (the margin at e_i), the reference's
 * path in the word is the exact best one whenever eps(B) < min_i m_i / (i + e_i - p).  It does not re-base inside
 * the word (the check at starts p+1..q-1) when B + x[s] -+ L eps(B) stays within +-RESET at every interior s.
 * Then best[q] is what the reference computes: the float32 additions replayed along the path from B, in order.
 *
 * Where the margins come from.  A word that misses is searched by word_search exactly as the reference searches
 * it at this B0 (float32, the same candidates in the same order, the first maximal kept), on a small table of its
 * own that also keeps, per end, the best of the other candidates; a re-base inside the word sends it back to the
 * ordinary search.  Its path and scores are the reference's for this occurrence.  Its computed margins c_j0 - c_j
 * (exact in double: differences of float32s) are within 2 (e_i - p) eps(B0) of the exact ones, so
 * m_i >= margin_i - 2 (e_i - p) eps(B0) (when that is > 0 at every end of the path, the path is the exact best
 * one, which the argument above needs); likewise x[s] lies within L eps(B0) of best[s] - B0.  The entry stores
 * eps_word = min_i (margin_i - 2 (e_i - p) eps(B0)) / (i + e_i - p) rounded down (0 when a margin is 0: a float32
 * tie, or one too close to call — never reused), the interior range [lo, hi] of x widened and rounded outwards,
 * and the path (piece lengths, ids, float32 scores).  word_safe checks both conditions at a later B with eps(B)
 * rounded up (the factor 1 + 2^-14 covers 1 / (1 - L u) and the double rounding of the checks, which are
 * widened by more than their own error); if they hold, the path is written into the position table as the
 * reference leaves it (its ends; the other positions of the word are never read again) and the search goes on
 * at q; otherwise the word is searched as usual.  The cache is keyed by the word's labels: the lattice depends on
 * nothing else (every character no piece has is label 0, an unknown node either way). */

typedef struct {
    float best, sec; /* the best candidate so far, and the best of the others (-inf: none) */
    int32_t start;   /* the best candidate's start (-1: none yet) */
    int32_t node;    /* its unit in the trie, or UNK_MARK */
} WPos;

typedef struct {
    int n;                   /* pieces */
    uint8_t plen[UW_KEY];
    int32_t id[UW_KEY];
    float score[UW_KEY];
    float value[UW_KEY];     /* best[] at the end of each piece */
    double eps, lo, hi;      /* as in UWSlot (eps <= 0: never reused) */
} WordPath;

/* The error bound of one float32 addition inside a word of L characters at base B (see above), rounded up. */
static inline double word_eps(const Model *m, double B, int L) {
    return (fabs(B) + L * m->smax) * (1.0 + 0x1p-14) * 0x1p-24 + 0x1p-149;
}

static inline void wcand(WPos *w, float c, int32_t s, int32_t node) {
    if (w->start == -1) {
        w->best = c;
        w->sec = -INFINITY;
        w->start = s;
        w->node = node;
    } else if (c > w->best) {
        w->sec = w->best;
        w->best = c;
        w->start = s;
        w->node = node;
    } else if (c > w->sec) {
        w->sec = c; /* an exact tie with the best lands here too: margin 0 */
    }
}

/* The word lab[0:L) searched from best = B as the reference does (the Viterbi below, restricted to the word):
 * its path and, for the cache, eps_word and the interior range (see above).  0 if the reference would re-base
 * inside the word (then nothing is kept). */
static int word_search(const Model *m, const uint16_t *lab, int L, float B, WordPath *wp) {
    const Cell *u = m->u;
    WPos w[UW_KEY + 1];
    for (int i = 1; i <= L; i++) w[i].start = -1;
    w[0].best = B;
    const float unk = m->unk_f;
    for (int s = 0; s < L; s++) {
        float base = w[s].best;
        if (s > 0 && !(base >= -RESET && base <= RESET)) return 0;
        int single = 0;
        int32_t at = u[0].base + lab[s];
        if (u[at].check == 0) {
            int e = s + 1;
            if (u[at].score == u[at].score) {
                wcand(&w[e], u[at].score + base, s, at);
                single = 1;
            }
            while (e < L) {
                int32_t t = u[at].base + lab[e];
                if (u[t].check != at) break;
                at = t;
                e++;
                if (u[at].score == u[at].score) wcand(&w[e], u[at].score + base, s, at);
            }
        }
        if (!single) wcand(&w[s + 1], unk + base, s, UNK_MARK);
    }
    int32_t ends[UW_KEY + 1];
    int k = 0;
    for (int e = L; e > 0; e = w[e].start) ends[k++] = e;
    const double eps0 = word_eps(m, B, L);
    double eps = INFINITY;
    wp->n = k;
    for (int i = 1; i <= k; i++) {
        int e = ends[k - i], s = w[e].start;
        wp->plen[i - 1] = (uint8_t)(e - s);
        int32_t node = w[e].node;
        wp->id[i - 1] = node == UNK_MARK ? UNK_MARK : m->id_of[node];
        wp->score[i - 1] = node == UNK_MARK ? unk : u[node].score;
        wp->value[i - 1] = w[e].best;
        double margin = (double)w[e].best - (double)w[e].sec; /* exact; +inf with a single candidate */
        double bound = (margin - 2.0 * e * eps0) / (double)(i + e) * (1 - 0x1p-50);
        if (!(bound > 0)) bound = 0;
        if (bound < eps) eps = bound;
    }
    double lo = 0, hi = 0;
    for (int s = 1; s < L; s++) {
        double x = (double)w[s].best - (double)B;
        if (s == 1 || x < lo) lo = x;
        if (s == 1 || x > hi) hi = x;
    }
    wp->eps = eps;
    wp->lo = lo - L * eps0 * (1 + 0x1p-40);
    wp->hi = hi + L * eps0 * (1 + 0x1p-40);
    return 1;
}

/* The path of a word is the reference's at this B (see above). */
static inline int word_safe(const Model *m, double B, int L, double eps_word, double lo, double hi) {
    double eps = word_eps(m, B, L);
    if (!(eps < eps_word)) return 0;
    double slack = L * eps + 1e-3;
    return B + lo - slack >= -(double)RESET && B + hi + slack <= (double)RESET;
}

static inline float round_down(double x) {
    float f = (float)x;
    return (double)f > x ? nextafterf(f, -INFINITY) : f;
}

static inline float round_up(double x) {
    float f = (float)x;
    return (double)f < x ? nextafterf(f, INFINITY) : f;
}

/* Path nodes written from the cache carry the piece id itself (the search's own carry a trie unit). */
#define ID_NODE(id) ((id) == UNK_MARK ? UNK_MARK : -3 - (id))

/* Write a word's path into the position table from start p (score B), replaying the float32 additions. */
static inline void word_replay(PosF *pos, Py_ssize_t p, float B, int n, const uint8_t *plen, const int32_t *id,
                               const float *score) {
    float v = B;
    Py_ssize_t at = p;
    for (int i = 0; i < n; i++) {
        Py_ssize_t e = at + plen[i];
        v = score[i] + v; /* the reference's float32 addition */
        pos[e].score = v;
        pos[e].start = (int32_t)at;
        pos[e].node = ID_NODE(id[i]);
        at = e;
    }
}

/* The word lab[p:p+L) (hash h) from start p with best[p] = B: 1 if its path was written into the position table
 * (the search goes on at p + L), 0 if the word must be searched as usual. */
static int word_cached(const Model *m, const uint16_t *lab, Py_ssize_t p, int L, uint64_t h, float B, PosF *pos,
                       CallStats *st) {
    WordCache *c = m->cache;
    const uint16_t *key = lab + p;
    size_t kb = (size_t)L * sizeof(uint16_t);
    uint16_t gen = wc_gen(c);
    void *ways[2];
    int nways = wc_ways(c, h, ways);
    for (int w = 0; w < nways; w++) {
        UWSlot copy;
        if (!wc_maybe(ways[w], (unsigned)L, gen) || !wc_read(ways[w], &copy, sizeof copy) || copy.h.gen != gen ||
            copy.h.len != L || copy.h.count > UW_PIECES ||
            !bytes_eq((const uint8_t *)copy.key, (const uint8_t *)key, kb))
            continue;
        st->hits++;
        if (copy.h.count == 0 || !word_safe(m, B, L, copy.eps, copy.lo, copy.hi)) return 0;
        word_replay(pos, p, B, copy.h.count, copy.plen, copy.id, copy.score);
        return 1;
    }
    st->misses++;
    WordPath wp;
    if (!word_search(m, key, L, B, &wp)) return 0;
    UWSlot *sl = (UWSlot *)wc_victim(ways, nways, h, gen);
    uint32_t odd;
    if ((odd = wc_claim(sl)) != 0) {
        if (!sl->h.len || sl->h.gen != gen) st->filled++;
        sl->h.gen = gen;
        sl->h.len = (uint8_t)L;
        if (wp.eps > 0 && wp.n <= UW_PIECES) {
            sl->h.count = (uint8_t)wp.n;
            sl->eps = round_down(wp.eps);
            sl->lo = round_down(wp.lo);
            sl->hi = round_up(wp.hi);
            memcpy(sl->plen, wp.plen, (size_t)wp.n);
            memcpy(sl->id, wp.id, (size_t)wp.n * sizeof(int32_t));
            memcpy(sl->score, wp.score, (size_t)wp.n * sizeof(float));
        } else { /* a (near) tie, or too many pieces: searched as usual every time */
            sl->h.count = 0;
            sl->eps = 0;
        }
        memcpy(sl->key, key, kb);
        wc_release(sl, odd);
    }
    Py_ssize_t at = p; /* this occurrence: the reference's own path and scores */
    for (int i = 0; i < wp.n; i++) {
        Py_ssize_t e = at + wp.plen[i];
        pos[e].score = wp.value[i];
        pos[e].start = (int32_t)at;
        pos[e].node = ID_NODE(wp.id[i]);
        at = e;
    }
    return 1;
}

/* A word is searched as usual at its first occurrence and enters the cache at its second: most words of a text
 * that occur once then cost only their hash and one bit of this small (L1-sized) table, instead of the cache's
 * bookkeeping and a slot that would not be read again.  The bits are hints only (a lost or stray bit changes
 * which way a word goes, never its ids); they are read and written with relaxed atomics and cleared with the
 * cache. */
static inline int word_seen(uint8_t *seen, uint64_t h) {
    uint32_t bit = (uint32_t)(h >> 40) & (SEEN_BYTES * 8 - 1);
    uint8_t *b = seen + (bit >> 3), mask = (uint8_t)(1u << (bit & 7));
    uint8_t v = __atomic_load_n(b, __ATOMIC_RELAXED);
    if (v & mask) return 1;
    __atomic_store_n(b, (uint8_t)(v | mask), __ATOMIC_RELAXED);
    return 0;
}

static void seen_clear(uint8_t *seen) {
    for (size_t k = 0; k < SEEN_BYTES; k += 8) __atomic_store_n((uint64_t *)(seen + k), 0, __ATOMIC_RELAXED);
}

/* A word's hash: its length with its first and last four labels (cheap; the slot's key is compared in full). */
static inline uint64_t word_hash(const uint16_t *key, Py_ssize_t L) {
    const uint8_t *p = (const uint8_t *)key;
    size_t nb = (size_t)L * sizeof(uint16_t);
    uint64_t a, b = 0;
    if (nb >= 8) {
        memcpy(&a, p, 8);
        memcpy(&b, p + nb - 8, 8);
    } else {
        a = load_tail(p, nb);
    }
    return mix64(a ^ (b * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)L << 56));
}

static inline int seen_test(const uint8_t *seen, uint64_t h) {
    uint32_t bit = (uint32_t)(h >> 40) & (SEEN_BYTES * 8 - 1);
    return (__atomic_load_n(seen + (bit >> 3), __ATOMIC_RELAXED) >> (bit & 7)) & 1;
}

/* Start loading the slot of the word that the search reaches next (its latency overlaps this word's work). */
static inline void word_prefetch(const WordCache *c, uint64_t h) {
    void *ways[2];
    int nways = wc_ways(c, h, ways);
    for (int w = 0; w < nways; w++) {
        __builtin_prefetch(ways[w], 1);
        __builtin_prefetch((const char *)ways[w] + 64, 1);
    }
}

/* One Viterbi pass over characters; SCORE is float (with SentencePiece's re-basing) or double. */
#define VITERBI_BODY(POS, SCORE, UNK, PIECE_SCORE, REBASE, WORD_HOOK, UNSET)                                                      \
    do {                                                                                                        \
        POS *p = (POS *)mem;                                                                                    \
        for (Py_ssize_t i = 0; i <= n; i++) p[i].start = -1, p[i].score = -(SCORE)INFINITY;                     \
        p[0].score = 0;                                                                                         \
        Py_ssize_t frontier = 0;                                                                                \
        for (Py_ssize_t s = 0; s < n; s++) {                                                                    \
            SCORE base = p[s].score;                                                                            \
            if (REBASE && !(base >= -RESET && base <= RESET)) {                                                 \
                for (Py_ssize_t i = s + 1; i <= frontier; i++)                                                  \
                    if (p[i].start != -1) p[i].score = p[i].score - base;                                       \
                p[s].score = base = 0;                                                                          \
            }                                                                                                   \
            WORD_HOOK                                                                                           \
            int single = 0;                                                                                 \
            Py_ssize_t last = s; /* the furthest end a piece reached from here (ends come in ascending order) */\
            int32_t at = u[0].base + lab[s];                                                                \
            if (u[at].check == 0) { /* the first character: the only step that can make a single-character piece */\
                Py_ssize_t e = s + 1;                                                                       \
                if (HIT(at)) {                                                                              \
                    SCORE cand = (SCORE)(PIECE_SCORE) + base;                                               \
                    POS *q = p + e;                                                                         \
                    if (UNSET(q) cand > q->score) {                                                \
                        q->score = cand;                                                                    \
                        q->start = (int32_t)s;                                                              \
                        q->node = at;                                                                       \
                    }                                                                                       \
                    single = 1;                                                                             \
                    last = e;                                                                               \
                }                                                                                           \
                for (;;) { /* lab[n] is 0: label 0 (no piece has it) never passes the check */          \
                    int32_t t = u[at].base + lab[e];                                                        \
                    if (u[t].check != at) break;                                                            \
                    at = t;                                                                                 \
                    e++;                                                                                    \
                    if (HIT(at)) {                                                                          \
                        SCORE cand = (SCORE)(PIECE_SCORE) + base;                                           \
                        POS *q = p + e;                                                                     \
                        if (UNSET(q) cand > q->score) {                                            \
                            q->score = cand;                                                                \
                            q->start = (int32_t)s;                                                          \
                            q->node = at;                                                                   \
                        }                                                                                   \
                        last = e;                                                                           \
                    }                                                                                       \
                }                                                                                           \
            }                                                                                               \
            if (last > frontier) frontier = last;                                                           \
            if (!single) {                                                                                      \
                Py_ssize_t e = s + 1;                                                                           \
                if (e > frontier) frontier = e;                                                                 \
                SCORE cand = (UNK) + base;                                                                      \
                POS *q = p + e;                                                                                 \
                if (UNSET(q) cand > q->score) {                                                        \
                    q->score = cand;                                                                            \
                    q->start = (int32_t)s;                                                                      \
                    q->node = UNK_MARK;                                                                         \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        rc = emit_path(m, ch, n, ch->nb, mem, sizeof(POS), out);                                                        \
    } while (0)

static int viterbi_f(const Model *m, const Chars *ch, Py_ssize_t n, char *mem, IdBuf *out, CallStats *st) {
    const Cell *u = m->u;
    const uint16_t *lab = ch->lab;
    const float unk = m->unk_f;
    const uint16_t sp = m->sp_label;
    const int words = m->cache != NULL;
    const int32_t *sp_at = ch->sp_at;
    Py_ssize_t wi = 0;     /* the first entry of sp_at past the current word start */
    Py_ssize_t next_p = -1; /* the next word's start when its hash is known already */
    uint64_t next_h = 0;
    int rc;
#define HIT(at) (u[at].score == u[at].score)
/* a word start: its path from the cache when that is exact (see "words"), then on at its end */
#define WORD_HOOK                                                                                               \
    if (words && (s == 0 || lab[s] == sp)) {                                                                    \
        while (sp_at[wi] <= s) wi++; /* the word ends at the next U+2581 (or at n, the list's last entry) */    \
        Py_ssize_t q = sp_at[wi];                                                                               \
        if (q - s <= UW_KEY) {                                                                                  \
            uint64_t h = s == next_p ? next_h : word_hash(lab + s, q - s);                                      \
            next_p = -1;                                                                                        \
            if (q < n && sp_at[wi + 1] - q <= UW_KEY) { /* the next word: its slot loads during this one */    \
                next_p = q;                                                                                     \
                next_h = word_hash(lab + q, sp_at[wi + 1] - q);                                                 \
                if (seen_test(m->seen, next_h)) word_prefetch(m->cache, next_h);                                \
            }                                                                                                   \
            if (word_seen(m->seen, h) && word_cached(m, lab, s, (int)(q - s), h, base, p, st)) {                \
                if (q > frontier) frontier = q;                                                                 \
                s = q - 1;                                                                                      \
                continue;                                                                                       \
            }                                                                                                   \
        }                                                                                                       \
    }
#define UNSET(q) q->start == -1 ||
#define NONE(q)
    if (words) VITERBI_BODY(PosF, float, unk, u[at].score, 1, WORD_HOOK, UNSET);
    else if (m->finite) VITERBI_BODY(PosF, float, unk, u[at].score, 1, , NONE); /* (see Model.finite) */
    else VITERBI_BODY(PosF, float, unk, u[at].score, 1, , UNSET);
#undef WORD_HOOK
#undef HIT
    return rc;
}

static int viterbi_d(const Model *m, const Chars *ch, Py_ssize_t n, char *mem, IdBuf *out) {
    const Cell *u = m->u;
    const uint16_t *lab = ch->lab;
    const int32_t *id_of = m->id_of;
    const double unk = m->unk_d;
    const double *ds = m->dscore;
    int rc;
#define HIT(at) (id_of[at] >= 0)
    VITERBI_BODY(PosD, double, unk, ds[id_of[at]], 0, , UNSET);
#undef UNSET
#undef NONE
#undef HIT
    return rc;
}

#define STACK_CHARS 1024

/* Viterbi over buf[0:nb] (valid UTF-8), appending the ids to ``out``.  ``given``: its labels already (one per
 * character, with room for one more), else NULL. */
static int viterbi(const Model *m, const unsigned char *buf, Py_ssize_t nb, LabBuf *given, IdBuf *out,
                   CallStats *st) {
    if (nb == 0) return 0;
    /* sized by bytes (an upper bound on the characters), so the labels take one pass over the text: per
     * character, the best path record (12 or 16 bytes), then its label (2 bytes) */
    size_t width = m->float32 ? sizeof(PosF) : sizeof(PosD);
    size_t lab_bytes = ((size_t)(nb + 1) * sizeof(uint16_t) + 3) & ~(size_t)3;
    size_t need = (size_t)(nb + 1) * width + lab_bytes + (m->cache ? (size_t)(nb + 2) * sizeof(int32_t) : 0);
    _Alignas(8) char stack_mem[(STACK_CHARS + 1) * (sizeof(PosD) + sizeof(uint16_t) + sizeof(int32_t)) + 16];
    char *mem = nb <= STACK_CHARS ? stack_mem : (char *)malloc(need);
    if (!mem) return E_NOMEM;
    uint16_t *lab = given ? given->v : (uint16_t *)(mem + (size_t)(nb + 1) * width);
    int32_t *sp_at = m->cache ? (int32_t *)(mem + (size_t)(nb + 1) * width + lab_bytes) : NULL;
    Py_ssize_t k = 0, nsp = 0;
    const uint16_t sp = m->sp_label;
    const uint16_t *bmp = m->label_bmp;
#define DECODE_LABELS(SP_AT)                                                                                    \
    for (Py_ssize_t i = 0; i < nb;) {                                                                           \
        uint32_t c = buf[i];                                                                                    \
        if (c < 0x80) {                                                                                         \
            i++;                                                                                                \
        } else if (c < 0xE0) {                                                                                  \
            c = ((c & 0x1F) << 6) | (buf[i + 1] & 0x3F);                                                        \
            i += 2;                                                                                             \
        } else if (c < 0xF0) {                                                                                  \
            c = ((c & 0x0F) << 12) | ((uint32_t)(buf[i + 1] & 0x3F) << 6) | (buf[i + 2] & 0x3F);               \
            i += 3;                                                                                             \
        } else {                                                                                                \
            c = ((c & 0x07) << 18) | ((uint32_t)(buf[i + 1] & 0x3F) << 12) | ((uint32_t)(buf[i + 2] & 0x3F) << 6) | \
                (buf[i + 3] & 0x3F);                                                                            \
            i += 4;                                                                                             \
        }                                                                                                       \
        uint16_t l = c < 0x10000 ? bmp[c] : (uint16_t)label_of(m, c);                                          \
        SP_AT;                                                                                                  \
        lab[k++] = l;                                                                                           \
    }
    if (given) {
        k = given->n;
        if (sp_at)
            for (Py_ssize_t i = 0; i < k; i++) {
                sp_at[nsp] = (int32_t)i;
                nsp += lab[i] == sp;
            }
    } else if (sp_at) {
        DECODE_LABELS((sp_at[nsp] = (int32_t)k, nsp += l == sp))
    } else {
        DECODE_LABELS((void)0)
    }
#undef DECODE_LABELS
    Py_ssize_t n = k; /* characters */
    if (sp_at) sp_at[nsp] = (int32_t)n;
    lab[n] = 0; /* the walks stop here */
    Chars ch = {buf, nb, lab, sp_at};
    /* at most one id per character, or four (bytes) with byte fallback: reserved once, so the path is written
     * without checks */
    Py_ssize_t most = m->byte_fallback ? 4 * n : n;
    int rc = ids_reserve(out, most);
    if (rc == 0) rc = m->float32 ? viterbi_f(m, &ch, n, mem, out, st) : viterbi_d(m, &ch, n, mem, out);
    if (mem != stack_mem) free(mem);
    return rc;
}

static PyObject *ids_slice_list(const int32_t *v_ids, Py_ssize_t n);

static PyObject *ids_list(IdBuf *b, int rc) {
    if (rc < 0) {
        ids_free(b);
        if (rc == E_NOMEM) return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, rc == E_SURROGATE ? "surrogate code point in text"
                                                            : "text has no piece and the model has no unknown token");
        return NULL;
    }
    PyObject *list = ids_slice_list(b->v, b->n);
    ids_free(b);
    return list;
}

/* ids v[0..n) as a list */
static PyObject *ids_slice_list(const int32_t *v_ids, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    if (list) {
        /* an id met again reuses its int object (the list holds it): fewer allocations, less memory */
        int32_t seen_id[1024];
        PyObject *seen[1024];
        unsigned mask = n > 256 ? 1023u : 63u; /* a short list: a small table, less to clear */
        memset(seen_id, 0xFF, (size_t)(mask + 1) * sizeof(int32_t));
        for (Py_ssize_t i = 0; i < n; i++) {
            int32_t id = v_ids[i];
            unsigned slot = (unsigned)id & mask;
            PyObject *v;
            if (seen_id[slot] == id) {
                v = seen[slot];
                Py_INCREF(v);
            } else {
                v = PyLong_FromLong(id);
                if (!v) {
                    Py_DECREF(list);
                    list = NULL;
                    break;
                }
                seen_id[slot] = id;
                seen[slot] = v;
            }
            PyList_SET_ITEM(list, i, v);
        }
    }
    return list;
}

PyDoc_STRVAR(tokenize_doc, "tokenize(text) -> list[int]: ids of one pre-token (no normalization); ValueError for "
                           "a surrogate or an unknown character without an unknown token.");

static PyObject *Model_tokenize(Model *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Text t;
    text_open(arg, &t);
    IdBuf out = {NULL, 0, 0};
    CallStats st = {0, 0, 0};
    ByteBuf buf = {NULL, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = text_utf8(&t, &buf);
    if (rc == 0) rc = viterbi(self, buf.v, buf.n, NULL, &out, &st);
    Py_END_ALLOW_THREADS free(buf.v);
    wc_account(self->cache, &st);
    return ids_list(&out, rc);
}

/* A ``normalizer`` argument into *nz: a Normalizer, or NULL for None; -1 with TypeError for anything else. */
static int normalizer_arg(PyObject *nobj, Normalizer **nz) {
    *nz = NULL;
    if (nobj == Py_None) return 0;
    if (!PyObject_TypeCheck(nobj, &NormalizerType)) {
        PyErr_SetString(PyExc_TypeError, "normalizer must be a Normalizer or None");
        return -1;
    }
    *nz = (Normalizer *)nobj;
    return 0;
}

PyDoc_STRVAR(encode_doc,
             "encode(items, normalizer=None, scrub=False) -> list[int]: ids of ``items`` in order (str items are "
             "normalized by ``normalizer`` when given, lone surrogates as U+FFFD first -- also with ``scrub`` -- then "
             "segmented; int items are ids and pass through). ValueError for an unknown character without an "
             "unknown token, or a surrogate when neither a normalizer nor ``scrub`` is given.");

static PyObject *Model_encode(Model *self, PyObject *args, PyObject *kwds) {
    PyObject *items, *nobj = Py_None;
    int scrub = 0;
    static char *kwlist[] = {"items", "normalizer", "scrub", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|Op", kwlist, &PyList_Type, &items, &nobj, &scrub)) return NULL;
    Normalizer *nz;
    if (normalizer_arg(nobj, &nz) < 0) return NULL;
    Items its;
    if (items_read(items, &its) < 0) return NULL;
    Py_ssize_t count = its.count;
    int32_t *passed = its.passed;
    PyObject *held = its.held;
    Py_INCREF(nobj);
    IdBuf out = {NULL, 0, 0};
    CallStats st = {0, 0, 0};
    ByteBuf buf = {NULL, 0, 0};
    LabBuf lab = {NULL, 0, 0, NULL, &self->labeler, 0};
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t k = 0; k < count && rc == 0; k++) {
        if (passed[k] >= 0) {
            rc = ids_push(&out, passed[k]);
            continue;
        }
        Text t;
        text_open(PyList_GET_ITEM(held, k), &t);
        buf.n = 0;
        lab.n = lab.done = 0;
        LabBuf *labs = nz ? &lab : NULL; /* the normalizer writes the labels */
        if (nz || scrub) {
            rc = prepare(nz, &t, &buf, labs);
            free(t.scrubbed);
        } else {
            rc = text_utf8(&t, &buf);
        }
        if (rc == 0 && labs) rc = labs_reserve(labs, 1);
        if (rc == 0) rc = viterbi(self, buf.v, buf.n, labs, &out, &st);
    }
    Py_END_ALLOW_THREADS items_free(&its);
    wc_account(self->cache, &st);
    Py_DECREF(nobj);
    free(buf.v);
    labs_free(&lab);
    return ids_list(&out, rc);
}

PyDoc_STRVAR(encode_text_doc,
             "encode_text(normalizer, text) -> list[int]: ids of one whole text, lone surrogates as U+FFFD, then "
             "normalized by ``normalizer`` (a Normalizer, or None for none) and segmented: ``encode([text], "
             "normalizer, True)`` in one call with less overhead. ValueError for an unknown character without an "
             "unknown token.");

#define GIL_FROM 512 /* characters: shorter texts keep the GIL (releasing it costs more than they take) */

static PyObject *Model_encode_text(Model *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode_text(normalizer, text) takes 2 arguments");
        return NULL;
    }
    PyObject *nobj = args[0], *text = args[1];
    Normalizer *nz;
    if (normalizer_arg(nobj, &nz) < 0) return NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Text t;
    text_open(text, &t);
    int32_t id_stack[256];
    unsigned char byte_stack[1024];
    IdBuf out = {id_stack, 0, 256, id_stack}; /* a short text needs no allocation */
    CallStats st = {0, 0, 0};
    ByteBuf buf = {byte_stack, 0, sizeof byte_stack, byte_stack};
    uint16_t lab_stack[512];
    LabBuf lab = {lab_stack, 0, 512, lab_stack, &self->labeler, 0};
    LabBuf *labs = nz ? &lab : NULL; /* the normalizer writes the labels */
    int rc;
    PyThreadState *ts = t.n >= GIL_FROM ? PyEval_SaveThread() : NULL;
    rc = prepare(nz, &t, &buf, labs);
    free(t.scrubbed);
    if (rc == 0 && labs) rc = labs_reserve(labs, 1);
    if (rc == 0) rc = viterbi(self, buf.v, buf.n, labs, &out, &st);
    if (ts) PyEval_RestoreThread(ts);
    bytes_free(&buf);
    labs_free(&lab);
    wc_account(self->cache, &st);
    return ids_list(&out, rc);
}

PyDoc_STRVAR(encode_texts_doc,
             "encode_texts(normalizer, texts, counts, num_threads=1) -> list: encode_text(normalizer, text) of each "
             "text of the list ``texts`` (with ``counts`` true, the number of ids of each), in one call with the GIL "
             "released once, chat-sized texts included (which encode_text encodes holding it), on up to num_threads "
             "threads (the caller's included, about one per 32 KiB of text) that take the next text as they finish "
             "one; the lists are built at the end, by the caller. The same errors as encode_text.");

/* An encode_texts call's texts, shared by the threads that encode them. */
typedef struct {
    Model *m;
    Normalizer *nz;
    Text *ts;
    BatchTexts bt;              /* where text i's ids went (a worker's out); failed: an E_* code */
} UgTexts;

/* One thread's share: its output, byte and label buffers, its cache counts. */
typedef struct {
    UgTexts *b;
    int k;
    IdBuf out;
    ByteBuf buf;
    LabBuf lab;
    CallStats st;
} UgWorker;

/* Encode texts taken from the counter until none is left (batch_threads.h; called without the GIL). */
static void *ug_worker(void *arg) {
    UgWorker *w = (UgWorker *)arg;
    UgTexts *b = w->b;
    LabBuf *labs = b->nz ? &w->lab : NULL;
    for (Py_ssize_t i; (i = batch_next(&b->bt)) >= 0;) {
        w->buf.n = 0;
        w->lab.n = 0, w->lab.done = 0;
        int rc = prepare(b->nz, &b->ts[i], &w->buf, labs);
        free(b->ts[i].scrubbed);
        b->ts[i].scrubbed = NULL;
        if (rc == 0 && labs) rc = labs_reserve(labs, 1);
        b->bt.who[i] = w->k;
        b->bt.from[i] = w->out.n;
        if (rc == 0) rc = viterbi(b->m, w->buf.v, w->buf.n, labs, &w->out, &w->st);
        if (rc != 0) {
            batch_fail(&b->bt, rc < 0 ? rc : E_NOMEM);
            break;
        }
        b->bt.to[i] = w->out.n;
    }
    return NULL;
}

static PyObject *Model_encode_texts(Model *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4 || !PyList_Check(args[1]) || (nargs == 4 && !PyLong_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "encode_texts(normalizer, texts: list[str], counts: bool, num_threads: int = 1)");
        return NULL;
    }
    PyObject *nobj = args[0];
    Normalizer *nz;
    if (normalizer_arg(nobj, &nz) < 0) return NULL;
    int counts = PyObject_IsTrue(args[2]);
    if (counts < 0) return NULL;
    long num_threads = nargs == 4 ? PyLong_AsLong(args[3]) : 1;
    if (num_threads == -1 && PyErr_Occurred()) return NULL;
    /* our own list of the texts: it keeps each one alive while the GIL is released */
    PyObject *held = PyList_GetSlice(args[1], 0, PyList_GET_SIZE(args[1]));
    if (!held) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(held), total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *x = PyList_GET_ITEM(held, i);
        if (!PyUnicode_Check(x)) {
            Py_DECREF(held);
            PyErr_Format(PyExc_TypeError, "texts[%zd] must be str", i);
            return NULL;
        }
        total += PyUnicode_GET_LENGTH(x);
    }
    long want = batch_threads_wanted(num_threads, count, total);
    Text *ts = (Text *)malloc(((size_t)count + 1) * sizeof(Text));
    UgWorker *workers = (UgWorker *)calloc((size_t)want, sizeof(UgWorker));
    UgTexts b = {self, nz, ts, {0}};
    if (!ts || !workers || batch_texts_init(&b.bt, count) < 0) {
        free(ts), free(workers);
        Py_DECREF(held);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) text_open(PyList_GET_ITEM(held, i), &ts[i]);
    for (long k = 0; k < want; k++) {
        workers[k].b = &b, workers[k].k = (int)k;
        workers[k].lab = (LabBuf){NULL, 0, 0, NULL, &self->labeler, 0};
    }
    Py_BEGIN_ALLOW_THREADS
    batch_threads_run(ug_worker, workers, sizeof *workers, want);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) free(ts[i].scrubbed); /* texts left when a worker failed */
    free(ts);
    for (long k = 0; k < want; k++) {
        bytes_free(&workers[k].buf);
        labs_free(&workers[k].lab);
        wc_account(self->cache, &workers[k].st);
    }
    PyObject *res = NULL;
    if (b.bt.failed < 0) {
        IdBuf none = {NULL, 0, 0, NULL};
        ids_list(&none, b.bt.failed); /* sets the error */
    } else {
        res = PyList_New(count);
        for (Py_ssize_t i = 0; res && i < count; i++) {
            Py_ssize_t n = b.bt.to[i] - b.bt.from[i];
            PyObject *v = counts ? PyLong_FromSsize_t(n) : ids_slice_list(workers[b.bt.who[i]].out.v + b.bt.from[i], n);
            if (!v) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, i, v);
        }
    }
    for (long k = 0; k < want; k++) ids_free(&workers[k].out);
    free(workers);
    batch_texts_free(&b.bt);
    Py_DECREF(held);
    return res;
}

PyDoc_STRVAR(encode_split_doc,
             "encode_split(text) -> list[int]: ids of ``text`` (already normalized and pre-tokenized as one string, no "
             "lone surrogates) searched piece by piece, a piece starting at every U+2581 (and at the start): as "
             "``encode`` of the pieces Hugging Face's splitting Metaspace makes, without building them. ValueError "
             "for a surrogate or an unknown character without an unknown token.");

static PyObject *Model_encode_split(Model *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Text t;
    text_open(arg, &t);
    IdBuf out = {NULL, 0, 0};
    CallStats st = {0, 0, 0};
    ByteBuf buf = {NULL, 0, 0};
    int rc;
    PyThreadState *ts = t.n >= GIL_FROM ? PyEval_SaveThread() : NULL;
    rc = text_utf8(&t, &buf);
    /* U+2581 is E2 96 81 in UTF-8; a piece runs from one to the next */
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 1; rc == 0 && i + 2 < buf.n; i++) {
        if (buf.v[i] == 0xE2 && buf.v[i + 1] == 0x96 && buf.v[i + 2] == 0x81) {
            rc = viterbi(self, buf.v + start, i - start, NULL, &out, &st);
            start = i;
            i += 2;
        }
    }
    if (rc == 0 && start < buf.n) rc = viterbi(self, buf.v + start, buf.n - start, NULL, &out, &st);
    if (ts) PyEval_RestoreThread(ts);
    free(buf.v);
    wc_account(self->cache, &st);
    return ids_list(&out, rc);
}

PyDoc_STRVAR(encode_metaspace_doc,
             "encode_metaspace(normalizer, classes, pairs, text) -> list[int] | None: Hugging Face's Precompiled + "
             "Replace(' {2,}', ' ') + Metaspace (prepend, split) + this model on one text in one call. None when the "
             "text has a surrogate or a *risky* position (the caller takes its exact path): by ``classes`` (one byte "
             "of flags per code point: 1 a key of its own, 2 joins a grapheme cluster, 4 Prepend, 8 first character "
             "of a key of several), a key followed by a joining character, a Prepend key, or a pair of characters "
             "that begins a longer key (``pairs``: sorted little-endian uint64 ``first << 21 | second``). Else the "
             "charsmap of ``normalizer`` (a Normalizer with every SentencePiece option off), runs of spaces to one, "
             "spaces to U+2581, U+2581 prepended unless the text starts with it, and each piece from one U+2581 to "
             "the next searched on its own.");

static int pair_known(const uint64_t *pairs, Py_ssize_t n, uint64_t key) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (pairs[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && pairs[lo] == key;
}

static PyObject *Model_encode_metaspace(Model *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyObject_TypeCheck(args[0], &NormalizerType) || !PyBytes_Check(args[1]) ||
        PyBytes_GET_SIZE(args[1]) != 0x110000 || !PyBytes_Check(args[2]) || PyBytes_GET_SIZE(args[2]) % 8 ||
        !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "encode_metaspace(normalizer, classes: bytes of 0x110000, pairs: bytes of "
                                         "uint64, text: str)");
        return NULL;
    }
    const Normalizer *nz = (const Normalizer *)args[0];
    const unsigned char *cls = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    const uint64_t *pairs = (const uint64_t *)PyBytes_AS_STRING(args[2]);
    Py_ssize_t n_pairs = PyBytes_GET_SIZE(args[2]) / 8;
    Text t;
    text_open(args[3], &t);
    for (Py_ssize_t i = 0; i < t.n; i++) {
        Py_UCS4 c = PyUnicode_READ(t.kind, t.data, i);
        if (c >= 0xD800 && c <= 0xDFFF) Py_RETURN_NONE;
        unsigned f = cls[c];
        if (!(f & 13)) continue; /* no key starts here, not Prepend */
        if ((f & 5) == 5) Py_RETURN_NONE; /* a Prepend key: its cluster takes the next character */
        if (i + 1 < t.n) {
            Py_UCS4 d = PyUnicode_READ(t.kind, t.data, i + 1);
            if (d >= 0xD800 && d <= 0xDFFF) Py_RETURN_NONE;
            if (!(cls[d] & 2)) continue;
            if (f & 1) Py_RETURN_NONE; /* a key whose cluster goes on */
            if ((f & 8) && pair_known(pairs, n_pairs, ((uint64_t)c << 21) | d)) Py_RETURN_NONE;
        }
    }
    int32_t id_stack[256];
    IdBuf out = {id_stack, 0, 256, id_stack};
    unsigned char byte_stack[1024], meta_stack[1536];
    ByteBuf buf = {byte_stack, 0, sizeof byte_stack, byte_stack};
    ByteBuf meta = {meta_stack, 0, sizeof meta_stack, meta_stack};
    CallStats st = {0, 0, 0};
    PyThreadState *ts = t.n >= GIL_FROM ? PyEval_SaveThread() : NULL;
    int rc = prepare(nz, &t, &buf, NULL);
    free(t.scrubbed);
    if (rc == 0 && buf.n > 0) rc = bytes_reserve(&meta, 3 * buf.n + 3);
    if (rc == 0 && buf.n > 0) {
        unsigned char *o = meta.v;
        const unsigned char *b = buf.v;
        Py_ssize_t n = buf.n;
        /* U+2581 first unless the text (spaces already U+2581) starts with it */
        if (!(b[0] == ' ' || (n >= 3 && b[0] == 0xE2 && b[1] == 0x96 && b[2] == 0x81))) {
            *o++ = 0xE2, *o++ = 0x96, *o++ = 0x81;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (b[i] == ' ') {
                *o++ = 0xE2, *o++ = 0x96, *o++ = 0x81;
                while (i + 1 < n && b[i + 1] == ' ') i++; /* a run of spaces is one */
            } else {
                *o++ = b[i];
            }
        }
        meta.n = o - meta.v;
        Py_ssize_t start = 0;
        for (Py_ssize_t i = 1; rc == 0 && i + 2 < meta.n; i++) {
            if (meta.v[i] == 0xE2 && meta.v[i + 1] == 0x96 && meta.v[i + 2] == 0x81) {
                rc = viterbi(self, meta.v + start, i - start, NULL, &out, &st);
                start = i;
                i += 2;
            }
        }
        if (rc == 0 && start < meta.n) rc = viterbi(self, meta.v + start, meta.n - start, NULL, &out, &st);
    }
    if (ts) PyEval_RestoreThread(ts);
    bytes_free(&buf);
    bytes_free(&meta);
    wc_account(self->cache, &st);
    return ids_list(&out, rc);
}

static PyObject *Model_n_units(Model *self, void *closure) { return PyLong_FromLong(self->n_units); }

PyDoc_STRVAR(cache_stats_doc, "cache_stats() -> (hits, misses, size, max_size) of the word cache (all 0 without one).");

static PyObject *Model_cache_stats(Model *self, PyObject *unused) {
    return wc_stats_tuple(self->cache);
}

PyDoc_STRVAR(clear_cache_doc, "clear_cache(): drop every entry of the word cache and reset its counters.");

static PyObject *Model_clear_cache(Model *self, PyObject *unused) {
    WordCache *c = self->cache;
    if (!c) Py_RETURN_NONE;
    Py_BEGIN_ALLOW_THREADS wc_clear(c);
    seen_clear(self->seen);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* ---- dump and load: the built model without the build (the compiled artifact cache's "unigram-model" part) ---- */

#define UDUMP_VERSION 1u
#define UDUMP_HEADER 72 /* magic 8, version, flags, n_units, n_ids, unk_id, n_astral, alpha, sp_label, unk_f, pad,
                           unk_d, smax (8 each) ... then bytes[256] */
enum { UD_FLOAT32 = 1, UD_BYTE_FALLBACK = 2, UD_WHOLE = 4, UD_FINITE = 8, UD_WORDS = 16 };

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define UD_LITTLE 1
#else
#define UD_LITTLE 0
#endif

static size_t udump_size(int64_t n_units, int64_t n_ids, int64_t n_astral) {
    return UDUMP_HEADER + 4 * 256 + (size_t)n_units * (sizeof(Cell) + 4) + ((size_t)n_ids + 1) * 8 +
           0x10000 * 2 + (size_t)n_astral * 6;
}

/* The largest label (the alphabet size): labels are 1..alpha. */
static uint32_t model_alpha(const Model *m) {
    uint32_t alpha = 0;
    for (uint32_t c = 0; c < 0x10000; c++) if (m->label_bmp[c] > alpha) alpha = m->label_bmp[c];
    for (Py_ssize_t k = 0; k < m->n_astral; k++) if (m->astral_label[k] > alpha) alpha = m->astral_label[k];
    return alpha;
}

PyDoc_STRVAR(udump_doc, "dump() -> bytes: the built model, for Model.load (little-endian hosts; ValueError elsewhere).");

static PyObject *Model_dump(Model *self, PyObject *unused) {
    (void)unused;
    if (!UD_LITTLE) {
        PyErr_SetString(PyExc_ValueError, "Model.dump needs a little-endian host");
        return NULL;
    }
    uint32_t alpha = model_alpha(self);
    int words = self->words_possible;
    size_t total = udump_size(self->n_units, self->n_ids, self->n_astral);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) return NULL;
    unsigned char *q = (unsigned char *)PyBytes_AS_STRING(out);
    uint32_t flags = (self->float32 ? UD_FLOAT32 : 0) | (self->byte_fallback ? UD_BYTE_FALLBACK : 0) |
                     (self->whole_lookup ? UD_WHOLE : 0) | (self->finite ? UD_FINITE : 0) | (words ? UD_WORDS : 0);
    uint32_t head[14] = {UDUMP_VERSION, flags, (uint32_t)self->n_units, (uint32_t)self->n_ids,
                         (uint32_t)self->unk_id, (uint32_t)self->n_astral, alpha, self->sp_label, 0, 0, 0, 0, 0, 0};
    memcpy(&head[8], &self->unk_f, 4);
    memcpy(q, "UNIGDUMP", 8);
    memcpy(q + 8, head, 40);
    memcpy(q + 48, &self->unk_d, 8);
    memcpy(q + 56, &self->smax, 8);
    memset(q + 64, 0, 8);
    q += UDUMP_HEADER;
    memcpy(q, self->bytes, 4 * 256), q += 4 * 256;
    memcpy(q, self->u, (size_t)self->n_units * sizeof(Cell)), q += (size_t)self->n_units * sizeof(Cell);
    memcpy(q, self->id_of, (size_t)self->n_units * 4), q += (size_t)self->n_units * 4;
    memcpy(q, self->dscore, ((size_t)self->n_ids + 1) * 8), q += ((size_t)self->n_ids + 1) * 8;
    memcpy(q, self->label_bmp, 0x10000 * 2), q += 0x10000 * 2;
    memcpy(q, self->astral, (size_t)self->n_astral * 4), q += (size_t)self->n_astral * 4;
    memcpy(q, self->astral_label, (size_t)self->n_astral * 2);
    return out;
}

static PyObject *udump_error(const char *what) {
    PyErr_Format(PyExc_ValueError, "damaged unigram model dump: %s", what);
    return NULL;
}

PyDoc_STRVAR(uload_doc, "Model.load(buffer, cache_size=0) -> Model: the model of a Model.dump() buffer; ValueError when "
                        "it is damaged (layout, sizes, any index out of its range).");

static PyObject *Model_load(PyObject *cls, PyObject *args) {
    Py_buffer view;
    Py_ssize_t cache_size = 0;
    if (!PyArg_ParseTuple(args, "y*|n", &view, &cache_size)) return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    size_t n = (size_t)view.len;
    const char *bad = NULL;
    Model *self = NULL;
    uint32_t head[14];
    if (!UD_LITTLE) { bad = "not a little-endian host"; goto fail; }
    if (cache_size < 0 || cache_size > ((Py_ssize_t)1 << 24)) { bad = "cache_size out of range"; goto fail; }
    if (n < UDUMP_HEADER || memcmp(p, "UNIGDUMP", 8) != 0) { bad = "bad magic"; goto fail; }
    memcpy(head, p + 8, 40);
    uint32_t flags = head[1], alpha = head[6], sp_label = head[7];
    int64_t n_units = (int32_t)head[2], n_ids = (int32_t)head[3], n_astral = head[5];
    int32_t unk_id = (int32_t)head[4];
    if (head[0] != UDUMP_VERSION) { bad = "unsupported version"; goto fail; }
    if (flags & ~31u) { bad = "bad flags"; goto fail; }
    if (n_units < 1 || n_units > ((int64_t)1 << 30) || n_ids < 0 || n_astral > 0x100000 || alpha > 65535 ||
        sp_label > alpha || unk_id < -1 || (int64_t)unk_id >= n_ids + 1) { bad = "counts out of range"; goto fail; }
    if (udump_size(n_units, n_ids, n_astral) != n) { bad = "length does not match the counts"; goto fail; }
    self = (Model *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    if (!self) { PyBuffer_Release(&view); return NULL; }
    self->float32 = (flags & UD_FLOAT32) != 0;
    self->byte_fallback = (flags & UD_BYTE_FALLBACK) != 0;
    self->whole_lookup = (flags & UD_WHOLE) != 0;
    self->finite = (flags & UD_FINITE) != 0;
    self->words_possible = (flags & UD_WORDS) != 0;
    self->n_units = (int32_t)n_units;
    self->n_ids = (int32_t)n_ids;
    self->unk_id = unk_id;
    self->n_astral = (Py_ssize_t)n_astral;
    self->sp_label = (uint16_t)sp_label;
    memcpy(&self->unk_f, p + 8 + 32, 4);
    memcpy(&self->unk_d, p + 48, 8);
    memcpy(&self->smax, p + 56, 8);
    const unsigned char *q = p + UDUMP_HEADER;
    memcpy(self->bytes, q, 4 * 256), q += 4 * 256;
    for (int k = 0; k < 256; k++)
        if (self->bytes[k] < -1 || self->bytes[k] >= self->n_ids) { bad = "byte id out of range"; goto fail; }
    self->u = (Cell *)malloc((size_t)n_units * sizeof(Cell));
    self->id_of = (int32_t *)malloc((size_t)n_units * 4);
    self->dscore = (double *)malloc(((size_t)n_ids + 1) * 8);
    self->label_bmp = (uint16_t *)malloc(0x10000 * 2);
    self->astral = (uint32_t *)malloc(((size_t)n_astral + 1) * 4);
    self->astral_label = (uint16_t *)malloc(((size_t)n_astral + 1) * 2);
    if (!self->u || !self->id_of || !self->dscore || !self->label_bmp || !self->astral || !self->astral_label)
        goto nomem;
    memcpy(self->u, q, (size_t)n_units * sizeof(Cell)), q += (size_t)n_units * sizeof(Cell);
    memcpy(self->id_of, q, (size_t)n_units * 4), q += (size_t)n_units * 4;
    memcpy(self->dscore, q, ((size_t)n_ids + 1) * 8), q += ((size_t)n_ids + 1) * 8;
    memcpy(self->label_bmp, q, 0x10000 * 2), q += 0x10000 * 2;
    memcpy(self->astral, q, (size_t)n_astral * 4), q += (size_t)n_astral * 4;
    memcpy(self->astral_label, q, (size_t)n_astral * 2);
    /* every step base + label (label <= alpha) of a unit in use stays inside the array, as the walk assumes */
    if (self->u[0].check != -2) { bad = "no root"; goto fail; }
    for (int64_t t = 0; t < n_units; t++) {
        const Cell *c = &self->u[t];
        if (c->check < -2 || c->check >= n_units) { bad = "parent out of range"; goto fail; }
        if (c->check != -1 && (c->base < 0 || (int64_t)c->base + alpha >= n_units)) {
            bad = "child out of range";
            goto fail;
        }
        if (self->id_of[t] < -1 || self->id_of[t] >= self->n_ids) { bad = "piece id out of range"; goto fail; }
    }
    for (uint32_t c = 0; c < 0x10000; c++)
        if (self->label_bmp[c] > alpha) { bad = "label out of range"; goto fail; }
    for (int64_t k = 0; k < n_astral; k++)
        if (self->astral[k] < 0x10000 || self->astral[k] >= 0x110000 || (k && self->astral[k] <= self->astral[k - 1]) ||
            self->astral_label[k] == 0 || self->astral_label[k] > alpha) {
            bad = "astral table out of order or range";
            goto fail;
        }
    if (self->label_bmp[0x2581] != sp_label) { bad = "word label mismatch"; goto fail; }
    self->labeler = (Labeler){self->label_bmp, self->astral, self->astral_label, self->n_astral};
    if ((flags & UD_WORDS) && cache_size > 0 &&
        (!(self->cache = wc_new((size_t)cache_size, sizeof(UWSlot))) || !(self->seen = (uint8_t *)calloc(SEEN_BYTES, 1))))
        goto nomem;
    PyBuffer_Release(&view);
    return (PyObject *)self;
nomem:
    PyBuffer_Release(&view);
    Py_XDECREF(self);
    return PyErr_NoMemory();
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(self);
    return udump_error(bad);
}

static PyMethodDef Model_methods[] = {
    {"tokenize", (PyCFunction)Model_tokenize, METH_O, tokenize_doc},
    {"encode", (PyCFunction)(void (*)(void))Model_encode, METH_VARARGS | METH_KEYWORDS, encode_doc},
    {"encode_text", (PyCFunction)(void (*)(void))Model_encode_text, METH_FASTCALL, encode_text_doc},
    {"encode_texts", (PyCFunction)(void (*)(void))Model_encode_texts, METH_FASTCALL, encode_texts_doc},
    {"encode_split", (PyCFunction)Model_encode_split, METH_O, encode_split_doc},
    {"encode_metaspace", (PyCFunction)(void (*)(void))Model_encode_metaspace, METH_FASTCALL, encode_metaspace_doc},
    {"cache_stats", (PyCFunction)Model_cache_stats, METH_NOARGS, cache_stats_doc},
    {"clear_cache", (PyCFunction)Model_clear_cache, METH_NOARGS, clear_cache_doc},
    {"dump", (PyCFunction)Model_dump, METH_NOARGS, udump_doc},
    {"load", (PyCFunction)Model_load, METH_VARARGS | METH_CLASS, uload_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Model_getset[] = {
    {"n_units", (getter)Model_n_units, NULL, "double-array size (units of 16 bytes)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "app.engine._native._unigram.Model",
    .tp_basicsize = sizeof(Model),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Unigram Viterbi: Model(pieces, ids, scores, n_ids, unk_id, unk_score, byte_fallback, float32, "
              "byte_ids, whole_lookup, cache_size=0).",
    .tp_methods = Model_methods,
    .tp_getset = Model_getset,
    .tp_new = Model_new,
};

static struct PyModuleDef unigram_module = {
    PyModuleDef_HEAD_INIT, "_unigram", "Compiled Unigram Viterbi and SentencePiece normalizer.", -1, NULL, NULL,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__unigram(void) {
    if (PyType_Ready(&ModelType) < 0 || PyType_Ready(&NormalizerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&unigram_module);
    if (!m) return NULL;
    Py_INCREF(&ModelType);
    if (PyModule_AddObject(m, "Model", (PyObject *)&ModelType) < 0) {
        Py_DECREF(&ModelType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&NormalizerType);
    if (PyModule_AddObject(m, "Normalizer", (PyObject *)&NormalizerType) < 0) {
        Py_DECREF(&NormalizerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
