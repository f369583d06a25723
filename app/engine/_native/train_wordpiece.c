/*
 * train_wordpiece.c: the WordPiece merge learner of app/engine/training/wordpiece.py (`learn_wordpiece`) in C, part of
 * app.engine._native._trainer (registered as the module function `wordpiece_learn`).
 *
 * The same algorithm on flat arrays: words as int32 symbol arrays, a pair table (count, version, the words that
 * held the pair), per symbol the pairs that hold it (for re-scoring after a merge changes count(a), count(b)),
 * and a binary min-heap of (rank, -count, left string, right string) with versions (stale entries skipped). The
 * heap key is a total order (two pairs never have the same two strings), so the merge chosen never depends on
 * push order or heap layout; the vectors may hold duplicates and dead entries, which only cost pushes of entries
 * that are then stale. Ranks: -count(ab) / (count(a) * count(b)) with the product exact (the caller checks that
 * it stays below 2**53, where the division is Python's correctly rounded int / int), or -count(ab).
 *
 * Words come as lists of symbol ids or as str (split here: the first character, then "##" + each other one, all of
 * them alphabet symbols). A merge rewrites each word that held the pair (rewrite_word): only the pairs next to a
 * merged occurrence change, each by its net change, and every pair whose count moved gets one fresh heap entry per
 * merge (under the seed's score every pair of a, b and the new symbol is re-ranked instead, which includes those).
 * The Python loop recounts the whole rewritten word; both give the same counts, so the same merges.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hash_mix.h"

typedef struct {
    int32_t *v;
    size_t n, cap;
} IVec;

static int ivec_push(IVec *x, int32_t val)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 4;
        int32_t *p = realloc(x->v, cap * sizeof *p);
        if (!p)
            return -1;
        x->v = p;
        x->cap = cap;
    }
    x->v[x->n++] = val;
    return 0;
}

typedef struct {
    int64_t count;
    uint32_t version;
    int32_t a, b;
    int live;
    int listed; /* in pairs_of[a] and pairs_of[b] since it last became live */
    int32_t last_word;
    uint32_t wstamp; /* the word rewrite that last touched it (its wdelta belongs to that rewrite) */
    uint32_t mstamp; /* the merge that last listed it in `touched` */
    int32_t wdelta;  /* occurrences gained (+) or lost (-) in the word being rewritten */
    IVec where;
} PairRec;

typedef struct {
    double rank;
    int64_t negc;
    int32_t pair;
    uint32_t version;
} HeapEnt;

typedef struct {
    /* symbols */
    uint32_t *cps;
    size_t cps_n, cps_cap;
    int64_t *soff; /* symbol k: cps[soff[k] .. soff[k] + slen[k]) */
    int32_t *slen;
    int64_t *count;
    IVec *pairs_of;
    size_t n_sym, cap_sym;
    uint64_t *sym_slots; /* hash of symbol strings: id + 1 (low 32 bits), hash (high 32 bits) */
    size_t sym_mask;
    /* pairs */
    PairRec *pairs;
    size_t n_pairs, cap_pairs;
    uint64_t *pkeys; /* (a << 32 | b) + 1 */
    int32_t *pvals;
    size_t pmask, pused;
    /* words */
    int32_t **seq;
    int32_t *len;
    int64_t *freq;
    Py_ssize_t n_words;
    /* heap */
    HeapEnt *heap;
    size_t hn, hcap;
    size_t n_live;
    int by_count;
    int32_t *scratch; /* a rewritten word */
    uint8_t *in_site; /* per old position: part of a merged occurrence */
    uint8_t *is_new;  /* per new position: a merged symbol */
    int32_t *local;   /* the distinct pairs one rewrite changes */
    uint32_t wstamp, mstamp;
    IVec touched;     /* the distinct pairs one merge changed */
} WP;

static uint64_t wp_hash_cps(const uint32_t *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}


static int sym_cmp(const WP *w, int32_t x, int32_t y)
{
    const uint32_t *a = w->cps + w->soff[x], *b = w->cps + w->soff[y];
    size_t na = (size_t)w->slen[x], nb = (size_t)w->slen[y], n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return na < nb ? -1 : (na > nb ? 1 : 0);
}

/* Finds the symbol with code points s[0..n); -1 if absent. *slot_out: where it is or would go. */
static int32_t sym_find(const WP *w, const uint32_t *s, size_t n, size_t *slot_out)
{
    uint64_t h = wp_hash_cps(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = h & w->sym_mask;
    for (;;) {
        uint64_t e = w->sym_slots[i];
        if (!e) {
            *slot_out = i;
            return -1;
        }
        int32_t id = (int32_t)(uint32_t)(e & 0xffffffffu) - 1;
        if ((uint32_t)(e >> 32) == tag && (size_t)w->slen[id] == n &&
            !memcmp(w->cps + w->soff[id], s, n * sizeof *s))
            return id;
        i = (i + 1) & w->sym_mask;
    }
}

static int sym_rehash(WP *w)
{
    size_t slots = (w->sym_mask + 1) * 2;
    uint64_t *ns = calloc(slots, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t k = 0; k < w->n_sym; k++) {
        uint64_t h = wp_hash_cps(w->cps + w->soff[k], (size_t)w->slen[k]);
        size_t i = h & (slots - 1);
        while (ns[i])
            i = (i + 1) & (slots - 1);
        ns[i] = ((h >> 32) << 32) | (uint64_t)(k + 1);
    }
    free(w->sym_slots);
    w->sym_slots = ns;
    w->sym_mask = slots - 1;
    return 0;
}

/* Interns s[0..n) (which may point into w->cps); returns its id, -1 on memory error. */
static int32_t sym_intern(WP *w, const uint32_t *s, size_t n, int *created)
{
    size_t slot = 0;
    int32_t id = sym_find(w, s, n, &slot);
    *created = 0;
    if (id >= 0)
        return id;
    if (w->cps_n + n > w->cps_cap) {
        size_t cap = w->cps_cap ? w->cps_cap : 1024;
        while (cap < w->cps_n + n)
            cap *= 2;
        uint32_t *p = malloc(cap * sizeof *p);
        if (!p)
            return -1;
        memcpy(p, w->cps, w->cps_n * sizeof *p);
        memcpy(p + w->cps_n, s, n * sizeof *p); /* s may live in the old buffer */
        free(w->cps);
        w->cps = p;
        w->cps_cap = cap;
    } else {
        memmove(w->cps + w->cps_n, s, n * sizeof *s);
    }
    if (w->n_sym == w->cap_sym) {
        size_t cap = w->cap_sym ? w->cap_sym * 2 : 256;
        int64_t *so = realloc(w->soff, cap * sizeof *so);
        if (!so)
            return -1;
        w->soff = so;
        int32_t *sl = realloc(w->slen, cap * sizeof *sl);
        if (!sl)
            return -1;
        w->slen = sl;
        int64_t *c = realloc(w->count, cap * sizeof *c);
        if (!c)
            return -1;
        w->count = c;
        IVec *po = realloc(w->pairs_of, cap * sizeof *po);
        if (!po)
            return -1;
        w->pairs_of = po;
        w->cap_sym = cap;
    }
    id = (int32_t)w->n_sym++;
    w->soff[id] = (int64_t)w->cps_n;
    w->slen[id] = (int32_t)n;
    w->count[id] = 0;
    memset(&w->pairs_of[id], 0, sizeof(IVec));
    w->cps_n += n;
    uint64_t h = wp_hash_cps(w->cps + w->soff[id], n);
    if (w->n_sym * 2 > w->sym_mask + 1) {
        if (sym_rehash(w) < 0)
            return -1;
    } else {
        w->sym_slots[slot] = ((h >> 32) << 32) | (uint64_t)(id + 1);
    }
    *created = 1;
    return id;
}

/* The pair record of (a, b), created (count 0, dead) if absent; -1 on memory error. */
static int32_t pair_get(WP *w, int32_t a, int32_t b)
{
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t i = mix64(key) & w->pmask;
    for (;;) {
        if (w->pkeys[i] == key)
            return w->pvals[i];
        if (!w->pkeys[i])
            break;
        i = (i + 1) & w->pmask;
    }
    if ((w->pused + 1) * 2 > w->pmask + 1) {
        size_t slots = (w->pmask + 1) * 2;
        uint64_t *nk = calloc(slots, sizeof *nk);
        int32_t *nv = malloc(slots * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -1;
        }
        for (size_t q = 0; q <= w->pmask; q++) {
            if (!w->pkeys[q])
                continue;
            size_t j = mix64(w->pkeys[q]) & (slots - 1);
            while (nk[j])
                j = (j + 1) & (slots - 1);
            nk[j] = w->pkeys[q];
            nv[j] = w->pvals[q];
        }
        free(w->pkeys);
        free(w->pvals);
        w->pkeys = nk;
        w->pvals = nv;
        w->pmask = slots - 1;
        i = mix64(key) & w->pmask;
        while (w->pkeys[i])
            i = (i + 1) & w->pmask;
    }
    if (w->n_pairs == w->cap_pairs) {
        size_t cap = w->cap_pairs ? w->cap_pairs * 2 : 1024;
        PairRec *p = realloc(w->pairs, cap * sizeof *p);
        if (!p)
            return -1;
        w->pairs = p;
        w->cap_pairs = cap;
    }
    int32_t id = (int32_t)w->n_pairs++;
    memset(&w->pairs[id], 0, sizeof(PairRec));
    w->pairs[id].a = a;
    w->pairs[id].b = b;
    w->pairs[id].last_word = -1;
    w->pkeys[i] = key;
    w->pvals[i] = id;
    w->pused++;
    return id;
}

static int heap_less(const WP *w, const HeapEnt *x, const HeapEnt *y)
{
    if (x->rank != y->rank)
        return x->rank < y->rank;
    if (x->negc != y->negc)
        return x->negc < y->negc;
    const PairRec *p = &w->pairs[x->pair], *q = &w->pairs[y->pair];
    int c = sym_cmp(w, p->a, q->a);
    if (c)
        return c < 0;
    return sym_cmp(w, p->b, q->b) < 0;
}

static void heap_up(WP *w, size_t i)
{
    HeapEnt e = w->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(w, &e, &w->heap[p]))
            break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = e;
}

static void heap_down(WP *w, size_t i)
{
    HeapEnt e = w->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const HeapEnt *best = &e;
        if (l < w->hn && heap_less(w, &w->heap[l], best)) {
            m = l;
            best = &w->heap[l];
        }
        if (l + 1 < w->hn && heap_less(w, &w->heap[l + 1], best))
            m = l + 1;
        if (m == i)
            break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    w->heap[i] = e;
}

/* A fresh entry for a live pair (the Python push: version + 1, only when count >= min_frequency); `sift` 0 only
   appends it (the caller heapifies). */
static int push_entry(WP *w, int32_t pid, int64_t min_frequency, int sift)
{
    PairRec *p = &w->pairs[pid];
    p->version++;
    if (p->count < min_frequency)
        return 0;
    if (w->hn == w->hcap) {
        size_t cap = w->hcap ? w->hcap * 2 : 1024;
        HeapEnt *h = realloc(w->heap, cap * sizeof *h);
        if (!h)
            return -1;
        w->heap = h;
        w->hcap = cap;
    }
    double rank = w->by_count ? -(double)p->count
                              : -((double)p->count / ((double)(w->count[p->a] * w->count[p->b])));
    w->heap[w->hn] = (HeapEnt){rank, -p->count, pid, p->version};
    if (sift)
        heap_up(w, w->hn);
    w->hn++;
    return 0;
}

static int push_pair(WP *w, int32_t pid, int64_t min_frequency)
{
    return push_entry(w, pid, min_frequency, 1);
}

static void heap_compact(WP *w)
{
    size_t m = 0;
    for (size_t k = 0; k < w->hn; k++)
        if (w->pairs[w->heap[k].pair].version == w->heap[k].version)
            w->heap[m++] = w->heap[k];
    w->hn = m;
    for (size_t k = m / 2; k-- > 0;)
        heap_down(w, k);
}

/* Initial counting: count(a, b) += f for an occurrence in word wi, which is listed where the pair occurs. */
static int pair_add(WP *w, int32_t a, int32_t b, int64_t f, int32_t wi)
{
    int32_t pid = pair_get(w, a, b);
    if (pid < 0)
        return -1;
    PairRec *p = &w->pairs[pid];
    p->count += f;
    if (p->last_word != wi) {
        p->last_word = wi;
        if (ivec_push(&p->where, wi) < 0)
            return -1;
    }
    return 0;
}

/* One occurrence of (a, b) lost (d = -1) or gained (d = +1) by the rewrite of the current word (w->wstamp); the
   first time the rewrite meets the pair, it goes to w->local[*n]. */
static int local_add(WP *w, int32_t a, int32_t b, int32_t d, size_t *n)
{
    int32_t pid = pair_get(w, a, b);
    if (pid < 0)
        return -1;
    PairRec *p = &w->pairs[pid];
    if (p->wstamp != w->wstamp) {
        p->wstamp = w->wstamp;
        p->wdelta = 0;
        w->local[(*n)++] = pid;
    }
    p->wdelta += d;
    return 0;
}

/* Rewrites word wi, merging every (a, b) left to right into r. Only the pairs next to a merged occurrence change
   (old pairs holding a merged a or b, new pairs holding a merged r); their counts move by f times the net change,
   a pair gained is listed for wi (where), and every pair whose count moved goes to w->touched once per merge.
   *hits: the occurrences merged (0: the word no longer holds the pair; nothing changes). */
static int rewrite_word(WP *w, int32_t wi, int32_t a, int32_t b, int32_t r, int64_t *hits)
{
    int32_t *seq = w->seq[wi], *out = w->scratch;
    int32_t n = w->len[wi], m = 0;
    int64_t f = w->freq[wi];
    *hits = 0;
    for (int32_t i = 0; i < n;) {
        if (i < n - 1 && seq[i] == a && seq[i + 1] == b) {
            w->in_site[i] = w->in_site[i + 1] = 1;
            w->is_new[m] = 1;
            out[m++] = r;
            i += 2;
            ++*hits;
        } else {
            w->in_site[i] = 0;
            w->is_new[m] = 0;
            out[m++] = seq[i++];
        }
    }
    if (!*hits)
        return 0;
    w->wstamp++;
    size_t nloc = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        if ((w->in_site[i] | w->in_site[i + 1]) && local_add(w, seq[i], seq[i + 1], -1, &nloc) < 0)
            return -1;
    for (int32_t j = 0; j + 1 < m; j++)
        if ((w->is_new[j] | w->is_new[j + 1]) && local_add(w, out[j], out[j + 1], 1, &nloc) < 0)
            return -1;
    for (size_t k = 0; k < nloc; k++) {
        int32_t pid = w->local[k];
        PairRec *p = &w->pairs[pid];
        if (!p->wdelta)
            continue;
        p->count += f * p->wdelta;
        if (p->wdelta > 0 && p->last_word != wi) {
            p->last_word = wi;
            if (ivec_push(&p->where, wi) < 0)
                return -1;
        }
        if (p->mstamp != w->mstamp) {
            p->mstamp = w->mstamp;
            if (ivec_push(&w->touched, pid) < 0)
                return -1;
        }
    }
    memcpy(seq, out, (size_t)m * sizeof *seq);
    w->len[wi] = m;
    w->count[a] -= f * *hits;
    w->count[b] -= f * *hits;
    w->count[r] += f * *hits;
    return 0;
}

/* After a rewrite: a touched pair at count <= 0 dies (its entries go stale), a live one is listed by symbol (for
   re-scoring; the seed's score only: a raw count changes only where a rewrite touched it). */
static int settle(WP *w, int32_t pid)
{
    PairRec *p = &w->pairs[pid];
    if (p->count <= 0) {
        if (p->live) {
            p->live = 0;
            w->n_live--;
        }
        p->version++;
        p->listed = 0;
        free(p->where.v);
        memset(&p->where, 0, sizeof p->where);
        p->last_word = -1;
        return 0;
    }
    if (!p->live) {
        p->live = 1;
        w->n_live++;
    }
    if (!p->listed && !w->by_count) {
        p->listed = 1;
        if (ivec_push(&w->pairs_of[p->a], pid) < 0 || ivec_push(&w->pairs_of[p->b], pid) < 0)
            return -1;
    }
    return 0;
}

/* Pushes every live pair of symbol x (dropping dead entries from its list). */
static int rescore_symbol(WP *w, int32_t x, int64_t min_frequency)
{
    IVec *v = &w->pairs_of[x];
    size_t m = 0;
    for (size_t k = 0; k < v->n; k++) {
        int32_t pid = v->v[k];
        PairRec *p = &w->pairs[pid];
        if (!p->live || !p->listed)
            continue;
        v->v[m++] = pid;
        if (push_pair(w, pid, min_frequency) < 0)
            return -1;
    }
    v->n = m;
    return 0;
}

static void wp_free(WP *w)
{
    for (size_t k = 0; k < w->n_sym; k++)
        free(w->pairs_of[k].v);
    for (size_t k = 0; k < w->n_pairs; k++)
        free(w->pairs[k].where.v);
    for (Py_ssize_t k = 0; k < w->n_words; k++)
        free(w->seq ? w->seq[k] : NULL);
    free(w->cps);
    free(w->soff);
    free(w->slen);
    free(w->count);
    free(w->pairs_of);
    free(w->sym_slots);
    free(w->pairs);
    free(w->pkeys);
    free(w->pvals);
    free(w->seq);
    free(w->len);
    free(w->freq);
    free(w->heap);
    free(w->scratch);
    free(w->in_site);
    free(w->is_new);
    free(w->local);
    free(w->touched.v);
}

/* wordpiece_learn(symbols, words, freqs, base, vocab_size, min_frequency, by_count, progress)
   -> (new_symbols: list[str], merged: int, stop: str) */
PyObject *wordpiece_learn(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *symbols, *words, *freqs, *progress;
    Py_ssize_t base, vocab_size;
    long long min_frequency;
    int by_count;
    if (!PyArg_ParseTuple(args, "O!O!O!nnLpO", &PyList_Type, &symbols, &PyList_Type, &words, &PyList_Type, &freqs,
                          &base, &vocab_size, &min_frequency, &by_count, &progress))
        return NULL;
    WP w;
    memset(&w, 0, sizeof w);
    w.by_count = by_count;
    PyObject *result = NULL;
    Py_ssize_t n_alpha = PyList_GET_SIZE(symbols);
    w.sym_mask = 1023;
    while (w.sym_mask + 1 < (size_t)n_alpha * 4)
        w.sym_mask = w.sym_mask * 2 + 1;
    w.sym_slots = calloc(w.sym_mask + 1, sizeof *w.sym_slots);
    w.pmask = (1 << 16) - 1;
    w.pkeys = calloc(w.pmask + 1, sizeof *w.pkeys);
    w.pvals = malloc((w.pmask + 1) * sizeof *w.pvals);
    if (!w.sym_slots || !w.pkeys || !w.pvals) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_alpha; k++) {
        PyObject *s = PyList_GET_ITEM(symbols, k);
        if (!PyUnicode_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "symbols must be str");
            goto done;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        uint32_t *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
        if (!tmp) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            tmp[i] = (uint32_t)PyUnicode_READ_CHAR(s, i);
        int created;
        int32_t id = sym_intern(&w, tmp, (size_t)n, &created);
        free(tmp);
        if (id < 0) {
            PyErr_NoMemory();
            goto done;
        }
        if (!created || id != k) {
            PyErr_SetString(PyExc_ValueError, "symbols must be distinct");
            goto done;
        }
    }
    w.n_words = PyList_GET_SIZE(words);
    if (PyList_GET_SIZE(freqs) != w.n_words) {
        PyErr_SetString(PyExc_ValueError, "words and freqs differ in length");
        goto done;
    }
    w.seq = calloc((size_t)w.n_words + 1, sizeof *w.seq);
    w.len = malloc(((size_t)w.n_words + 1) * sizeof *w.len);
    w.freq = malloc(((size_t)w.n_words + 1) * sizeof *w.freq);
    if (!w.seq || !w.len || !w.freq) {
        PyErr_NoMemory();
        goto done;
    }
    size_t longest = 0;
    for (Py_ssize_t k = 0; k < w.n_words; k++) {
        PyObject *seq = PyList_GET_ITEM(words, k);
        int is_str = PyUnicode_Check(seq);
        if (!is_str && !PyList_Check(seq)) {
            PyErr_SetString(PyExc_TypeError, "words must be str or lists of symbol ids");
            goto done;
        }
        Py_ssize_t n = is_str ? PyUnicode_GET_LENGTH(seq) : PyList_GET_SIZE(seq);
        w.len[k] = (int32_t)n;
        w.seq[k] = malloc(((size_t)n + 1) * sizeof(int32_t));
        w.freq[k] = PyLong_AsLongLong(PyList_GET_ITEM(freqs, k));
        if (!w.seq[k] || (w.freq[k] == -1 && PyErr_Occurred())) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto done;
        }
        if (is_str) {
            /* the first character as itself, the others as "##" + character, each a symbol of the alphabet */
            int kind = PyUnicode_KIND(seq);
            const void *data = PyUnicode_DATA(seq);
            for (Py_ssize_t i = 0; i < n; i++) {
                uint32_t key[3] = {'#', '#', (uint32_t)PyUnicode_READ(kind, data, i)};
                size_t slot;
                int32_t id = i ? sym_find(&w, key, 3, &slot) : sym_find(&w, key + 2, 1, &slot);
                if (id < 0) {
                    PyErr_SetString(PyExc_ValueError, "a character of a word is not in the alphabet");
                    goto done;
                }
                w.seq[k][i] = id;
            }
        } else {
            for (Py_ssize_t i = 0; i < n; i++) {
                long x = PyLong_AsLong(PyList_GET_ITEM(seq, i));
                if (x < 0 || x >= n_alpha) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_ValueError, "symbol id out of range");
                    goto done;
                }
                w.seq[k][i] = (int32_t)x;
            }
        }
        if ((size_t)n > longest)
            longest = (size_t)n;
    }
    w.scratch = malloc((longest + 1) * sizeof *w.scratch);
    w.in_site = malloc(longest + 1);
    w.is_new = malloc(longest + 1);
    w.local = malloc((2 * longest + 1) * sizeof *w.local);
    if (!w.scratch || !w.in_site || !w.is_new || !w.local) {
        PyErr_NoMemory();
        goto done;
    }
    /* initial counts, pairs, where, pairs_of; then one heapify (the key is a total order: the same heap top as
       pushing one by one) */
    for (Py_ssize_t k = 0; k < w.n_words; k++) {
        int64_t f = w.freq[k];
        for (int32_t i = 0; i < w.len[k]; i++)
            w.count[w.seq[k][i]] += f;
        for (int32_t i = 0; i + 1 < w.len[k]; i++)
            if (pair_add(&w, w.seq[k][i], w.seq[k][i + 1], f, (int32_t)k) < 0) {
                PyErr_NoMemory();
                goto done;
            }
    }
    for (size_t pid = 0; pid < w.n_pairs; pid++)
        if (settle(&w, (int32_t)pid) < 0 || push_entry(&w, (int32_t)pid, min_frequency, 0) < 0) {
            PyErr_NoMemory();
            goto done;
        }
    for (size_t k = w.hn / 2; k-- > 0;)
        heap_down(&w, k);
    Py_ssize_t merged = 0;
    const char *stop = "no pairs";
    for (;;) {
        if (base + merged >= vocab_size) {
            stop = "vocab_size";
            break;
        }
        int32_t top = -1;
        while (w.hn) {
            HeapEnt e = w.heap[0];
            w.heap[0] = w.heap[--w.hn];
            if (w.hn)
                heap_down(&w, 0);
            if (w.pairs[e.pair].version == e.version) {
                top = e.pair;
                break;
            }
        }
        if (top < 0) {
            if (w.n_live)
                stop = "min_frequency";
            break;
        }
        int32_t a = w.pairs[top].a, b = w.pairs[top].b;
        /* the new symbol: a + b without its "##" */
        size_t la = (size_t)w.slen[a], lb = (size_t)w.slen[b];
        const uint32_t *sb = w.cps + w.soff[b];
        size_t skip = lb >= 2 && sb[0] == '#' && sb[1] == '#' ? 2 : 0;
        uint32_t *tmp = malloc((la + lb + 1) * sizeof *tmp);
        if (!tmp) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(tmp, w.cps + w.soff[a], la * sizeof *tmp);
        memcpy(tmp + la, sb + skip, (lb - skip) * sizeof *tmp);
        int created;
        int32_t r = sym_intern(&w, tmp, la + lb - skip, &created);
        free(tmp);
        if (r < 0) {
            PyErr_NoMemory();
            goto done;
        }
        w.touched.n = 0;
        w.mstamp++;
        IVec where = w.pairs[top].where; /* popped: the pair's own list goes */
        memset(&w.pairs[top].where, 0, sizeof where);
        w.pairs[top].last_word = -1;
        for (size_t q = 0; q < where.n; q++) {
            int64_t hits;
            if (rewrite_word(&w, where.v[q], a, b, r, &hits) < 0) {
                free(where.v);
                PyErr_NoMemory();
                goto done;
            }
        }
        free(where.v);
        for (size_t q = 0; q < w.touched.n; q++)
            if (settle(&w, w.touched.v[q]) < 0) {
                PyErr_NoMemory();
                goto done;
            }
        /* new entries for the pairs whose rank moved: under the raw count those whose count moved; under the seed's
           score every pair of a, b and r (that includes all touched pairs: each holds a merged a, b or r) */
        if (by_count) {
            for (size_t q = 0; q < w.touched.n; q++) {
                int32_t pid = w.touched.v[q];
                if (w.pairs[pid].live && push_pair(&w, pid, min_frequency) < 0) {
                    PyErr_NoMemory();
                    goto done;
                }
            }
        } else if (rescore_symbol(&w, a, min_frequency) < 0 || rescore_symbol(&w, b, min_frequency) < 0 ||
                   rescore_symbol(&w, r, min_frequency) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        if (w.hn > 4 * w.n_live + 1024)
            heap_compact(&w);
        if (created)
            merged++;
        if (progress != Py_None) {
            PyObject *res = PyObject_CallFunction(progress, "nn", merged, vocab_size - base);
            if (!res)
                goto done;
            Py_DECREF(res);
        }
    }
    PyObject *news = PyList_New((Py_ssize_t)(w.n_sym - (size_t)n_alpha));
    if (!news)
        goto done;
    for (size_t k = (size_t)n_alpha; k < w.n_sym; k++) {
        PyObject *s = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, w.cps + w.soff[k], w.slen[k]);
        if (!s) {
            Py_DECREF(news);
            goto done;
        }
        PyList_SET_ITEM(news, (Py_ssize_t)(k - (size_t)n_alpha), s);
    }
    result = Py_BuildValue("(Nns)", news, merged, stop);
done:
    wp_free(&w);
    return result;
}
