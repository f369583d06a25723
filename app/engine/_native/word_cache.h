/*
 * word_cache.h: a bounded, lock-free cache of fixed-size slots, shared by the threads that encode with one model
 * while the GIL is released (mergebpe.c's and spbpe.c's segment caches, unigram.c's word cache). Header-only.
 *
 * A two-way set-associative table of ``nslots`` slots of ``slot_size`` bytes (a multiple of 64, 64-byte aligned): a
 * key may sit in its hashed slot or the one next to it (index ^ 1), so two frequent keys that hash to the same slot
 * do not keep evicting each other (:func:`wc_ways`, :func:`wc_victim`). Every slot
 * type starts with a ``WCHead``: a sequence number (even: stable; odd: being written), the generation it was
 * written in, and the key's length and value count. A reader copies the slot and keeps the copy only if the sequence number was even and unchanged around
 * the copy, so hits write nothing shared; a writer claims a slot by moving its number from even to odd
 * (compare-and-swap) and skips the insert if another thread holds it. ``wc_clear`` moves to the next generation
 * instead of touching every slot (an entry of an older generation reads as empty), so clearing is O(1) except once
 * every 65,535 clears. What a slot holds after the head is the caller's; a cache never changes results, only how
 * often they are recomputed.
 *
 * Segment caches (mergebpe.c's and spbpe.c's) share one slot shape and one lookup: a key of code points, all in the
 * BMP, stored as ``uint16_t`` right after the head, then its ``int32_t`` ids, as many as fit the slot
 * (:func:`wc_seg_get`, :func:`wc_seg_put`).
 */
#ifndef TOK_WORD_CACHE_H
#define TOK_WORD_CACHE_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hash_mix.h"

typedef struct {
    uint32_t seq; /* even: stable; odd: being written */
    uint16_t gen; /* the cache's generation when written: an entry of an older one is empty */
    uint8_t len;  /* the key's length, 0 = empty (the caller's unit) */
    uint8_t count; /* how many values it holds (the caller's unit) */
} WCHead; /* 8 bytes */

typedef struct WordCache {
    unsigned char *slots;
    size_t nslots, slot_size;
    uint32_t gen;          /* wc_clear() moves to the next generation instead of touching every slot */
    uint64_t hits, misses; /* atomic adds, once per call */
    int64_t size;          /* slots of this generation (atomic) */
} WordCache;

/* One call's counts, added to the cache's once at the end of the call (fewer atomic operations). */
typedef struct {
    uint64_t hits, misses, filled;
} CallStats;

/* A cache of ``nslots`` (>= 1) slots of ``slot_size`` bytes (a multiple of 64), or NULL without memory. */
static WordCache *wc_new(size_t nslots, size_t slot_size) {
    WordCache *c = (WordCache *)calloc(1, sizeof(WordCache));
    if (!c) return NULL;
    c->slots = (unsigned char *)aligned_alloc(64, nslots * slot_size);
    if (!c->slots) {
        free(c);
        return NULL;
    }
    memset(c->slots, 0, nslots * slot_size);
    c->nslots = nslots;
    c->slot_size = slot_size;
    c->gen = 1;
    return c;
}

static void wc_free(WordCache *c) {
    if (c) free(c->slots), free(c);
}

/* The own slot of a key of hash ``h``: the low 32 bits of ``h`` scaled to the table. */
static inline size_t wc_slot_index(const WordCache *c, uint64_t h) {
    return (size_t)(((uint64_t)(uint32_t)h * c->nslots) >> 32);
}

/* The slots a key of hash ``h`` may occupy, into ways[]: its own (wc_slot_index) and the one next to it (index ^ 1)
 * when that is inside the table; returns how many (1 or 2). */
static inline int wc_ways(const WordCache *c, uint64_t h, void *ways[2]) {
    size_t i = wc_slot_index(c, h);
    ways[0] = c->slots + i * c->slot_size;
    if ((i ^ 1) >= c->nslots) return 1;
    ways[1] = c->slots + (i ^ 1) * c->slot_size;
    return 2;
}

/* 0 when the slot cannot hold a key of length ``len`` of generation ``gen`` (read without the sequence lock: a
 * hint that saves copying a slot that cannot match; wc_read decides). */
static inline int wc_maybe(const void *slot, unsigned len, uint16_t gen) {
    const WCHead *h = (const WCHead *)slot;
    return h->len == len && h->gen == gen;
}

/* Of a key's ``n`` slots (after a miss in all), the one to write: an empty one or one of an older generation,
 * else one picked by a bit of the hash. */
static inline void *wc_victim(void *ways[2], int n, uint64_t h, uint16_t gen) {
    for (int w = 0; w < n; w++) {
        const WCHead *head = (const WCHead *)ways[w];
        if (!head->len || head->gen != gen) return ways[w];
    }
    return ways[n == 2 ? (int)((h >> 47) & 1) : 0];
}

static inline uint16_t wc_gen(const WordCache *c) { return (uint16_t)__atomic_load_n(&c->gen, __ATOMIC_ACQUIRE); }

/* Copy the slot into ``copy`` (``size`` bytes); 1 if the copy is consistent (no writer in between). */
static inline int wc_read(void *slot, void *copy, size_t size) {
    WCHead *h = (WCHead *)slot;
    uint32_t s1 = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
    if (s1 & 1) return 0;
    memcpy(copy, slot, size);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&h->seq, __ATOMIC_RELAXED) == s1;
}

/* Claim the slot for writing: the odd sequence number to pass to wc_release, or 0 if another thread holds it. */
static inline uint32_t wc_claim(void *slot) {
    WCHead *h = (WCHead *)slot;
    uint32_t s = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
    if ((s & 1) || !__atomic_compare_exchange_n(&h->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return 0;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return s + 1;
}

static inline void wc_release(void *slot, uint32_t odd) {
    __atomic_store_n(&((WCHead *)slot)->seq, odd + 1, __ATOMIC_RELEASE);
}

static void wc_account(WordCache *c, const CallStats *st) {
    if (!c) return;
    if (st->hits) __atomic_add_fetch(&c->hits, st->hits, __ATOMIC_RELAXED);
    if (st->misses) __atomic_add_fetch(&c->misses, st->misses, __ATOMIC_RELAXED);
    if (st->filled) __atomic_add_fetch(&c->size, (int64_t)st->filled, __ATOMIC_RELAXED);
}

/* Drop every entry and reset the counters (safe while other threads read and write; call without the GIL). */
static void wc_clear(WordCache *c) {
    if (!c) return;
    uint32_t next = (__atomic_load_n(&c->gen, __ATOMIC_RELAXED) + 1) & 0xFFFF;
    if (next == 0) { /* the generation wraps: empty every slot so that no entry of 65536 clears ago comes back */
        for (size_t k = 0; k < c->nslots; k++) {
            unsigned char *sl = c->slots + k * c->slot_size;
            uint32_t odd;
            while (!(odd = wc_claim(sl))) sched_yield(); /* another thread is writing this slot */
            memset(sl + sizeof(uint32_t), 0, c->slot_size - sizeof(uint32_t));
            wc_release(sl, odd);
        }
        next = 1;
    }
    __atomic_store_n(&c->gen, next, __ATOMIC_RELEASE);
    __atomic_store_n(&c->hits, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->misses, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->size, 0, __ATOMIC_RELAXED);
}

/* ---- segment caches ------------------------------------------------------------------------------------------ */

/* A segment slot: the WCHead (len: code points of the key, count: ids), the key's code points as uint16_t from byte
 * WC_SEG_KEY_OFF, then its ids as int32_t from WC_SEG_IDS_AT(len), the next multiple of 4. A slot of S bytes holds
 * a segment of n code points and k ids when WC_SEG_IDS_AT(n) + 4 k <= S (wc_seg_fits; n and k also at most 255, the
 * head's bytes): in 64 bytes 24 code points and 2 ids, 16 and 6, 12 and 8, 4 and 12 -- long words, which split into
 * few ids, fit as well as short ones. */
#define WC_SEG_KEY_OFF sizeof(WCHead)
#define WC_SEG_IDS_AT(n) ((WC_SEG_KEY_OFF + 2 * (size_t)(n) + 3) & ~(size_t)3)

static inline int wc_seg_fits(size_t slot_size, Py_ssize_t n, Py_ssize_t nids) {
    return n >= 1 && n <= 255 && nids >= 0 && nids <= 255 && WC_SEG_IDS_AT(n) + 4 * (size_t)nids <= slot_size;
}

/* The ids of a segment of n code points in a slot (or a copy of one). */
static inline const int32_t *wc_seg_ids(const void *slot, Py_ssize_t n) {
    return (const int32_t *)((const unsigned char *)slot + WC_SEG_IDS_AT(n));
}

/* Where a missed segment goes: its hash, its slots and the generation it was looked up in (for wc_seg_put). */
typedef struct {
    uint64_t h;
    void *ways[2];
    int nways;
    uint16_t gen;
} WCSeg;

/* The segment hash: FNV-1a steps over the code points from WC_SEG_BASIS, then mixed with the length (wc_seg_done). */
#define WC_SEG_BASIS 1469598103934665603ULL
static inline uint64_t wc_seg_step(uint64_t x, uint32_t cp) { return (x ^ cp) * 1099511628211ULL; }
static inline uint64_t wc_seg_done(uint64_t x, Py_ssize_t n) { return mix64(x ^ (uint64_t)n); }

/* 1 when a slot of ``slot_size`` bytes can hold a segment of n code points whose bitwise OR is ``any`` (n at least
 * 1 and short enough to fit with one id, every code point in the BMP). */
static inline int wc_seg_cacheable(size_t slot_size, Py_ssize_t n, uint32_t any) {
    return any < 0x10000 && wc_seg_fits(slot_size, n, 1);
}

/* The hash of the segment t[0..n) into *h: 1, or 0 when no slot of ``slot_size`` bytes can hold it (see
 * wc_seg_cacheable). */
static inline int wc_seg_hash(const uint32_t *t, Py_ssize_t n, size_t slot_size, uint64_t *h) {
    if (!wc_seg_fits(slot_size, n, 1)) return 0;
    uint64_t x = WC_SEG_BASIS;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] >= 0x10000) return 0;
        x = wc_seg_step(x, t[i]);
    }
    *h = wc_seg_done(x, n);
    return 1;
}

/* Start loading the first slot a segment of hash h may sit in. */
static inline void wc_seg_prefetch(const WordCache *c, uint64_t h) {
    __builtin_prefetch(c->slots + wc_slot_index(c, h) * c->slot_size);
}

/* For a segment about to be looked up: 1 if ``c`` may hold the segment t[0..n) (its hash into *h, and the first
 * slot it may sit in starts loading, so the lookup soon after finds it in cache), else 0 (no cache, or
 * wc_seg_hash returned 0). */
static inline int wc_seg_ahead(const WordCache *c, const uint32_t *t, Py_ssize_t n, size_t slot_size, uint64_t *h) {
    if (!c || !wc_seg_hash(t, n, slot_size, h)) return 0;
    wc_seg_prefetch(c, *h);
    return 1;
}

/* Look the segment t[0..n) of hash h (wc_seg_hash's, which returned 1) up in ``c``, whose slots are ``slot_size``
 * bytes. 1: a hit, the slot copied to ``copy`` (``slot_size`` bytes the caller owns, 4-byte aligned; ``count`` of
 * the head, the ids at wc_seg_ids(copy, n)), counted in st->hits; 0: a miss, counted in st->misses, and ``seg`` says
 * where wc_seg_put may store the segment's ids. */
static inline int wc_seg_get_hashed(WordCache *c, const uint32_t *t, Py_ssize_t n, uint64_t h, void *copy,
                                    size_t slot_size, WCSeg *seg, CallStats *st) {
    uint16_t gen = wc_gen(c);
    seg->h = h;
    seg->gen = gen;
    seg->nways = wc_ways(c, h, seg->ways);
    const WCHead *head = (const WCHead *)copy;
    const uint16_t *key = (const uint16_t *)((const unsigned char *)copy + WC_SEG_KEY_OFF);
    for (int w = 0; w < seg->nways; w++) {
        if (!wc_maybe(seg->ways[w], (unsigned)n, gen) || !wc_read(seg->ways[w], copy, slot_size) ||
            head->len != n || head->gen != gen || !wc_seg_fits(slot_size, n, head->count))
            continue;
        Py_ssize_t i = 0;
        while (i < n && key[i] == t[i]) i++;
        if (i == n) {
            st->hits++;
            return 1;
        }
    }
    st->misses++;
    return 0;
}

/* wc_seg_get_hashed with the hash computed here; -1 (nothing counted) when there is no cache or the segment is not
 * cacheable (wc_seg_hash returned 0). */
static inline int wc_seg_get(WordCache *c, const uint32_t *t, Py_ssize_t n, void *copy, size_t slot_size, WCSeg *seg,
                             CallStats *st) {
    uint64_t h;
    if (!c || !wc_seg_hash(t, n, slot_size, &h)) return -1;
    return wc_seg_get_hashed(c, t, n, h, copy, slot_size, seg, st);
}

/* After a miss (wc_seg_get returned 0), store the segment t[0..n) with its ``nids`` ids, unless they do not fit a
 * slot of ``slot_size`` bytes or another thread is writing the slot; a slot that was empty is counted in
 * st->filled. */
static inline void wc_seg_put(const WCSeg *seg, const uint32_t *t, Py_ssize_t n, size_t slot_size, const int32_t *ids,
                              Py_ssize_t nids, CallStats *st) {
    unsigned char *sl = (unsigned char *)wc_victim((void **)seg->ways, seg->nways, seg->h, seg->gen);
    WCHead *head = (WCHead *)sl;
    uint32_t odd;
    if (wc_seg_fits(slot_size, n, nids) && (odd = wc_claim(sl)) != 0) {
        if (!head->len || head->gen != seg->gen) st->filled++;
        head->gen = seg->gen;
        head->len = (uint8_t)n;
        head->count = (uint8_t)nids;
        uint16_t *key = (uint16_t *)(sl + WC_SEG_KEY_OFF);
        for (Py_ssize_t i = 0; i < n; i++) key[i] = (uint16_t)t[i];
        memcpy(sl + WC_SEG_IDS_AT(n), ids, (size_t)nids * sizeof(int32_t));
        wc_release(sl, odd);
    }
}

/* ``cache_stats()`` of a model: (hits, misses, size, max_size) as a new tuple, all 0 without a cache (GIL held;
 * needs Python.h first). */
static PyObject *wc_stats_tuple(const WordCache *c) {
    if (!c) return Py_BuildValue("(KKnn)", 0ULL, 0ULL, (Py_ssize_t)0, (Py_ssize_t)0);
    return Py_BuildValue("(KKnn)", (unsigned long long)__atomic_load_n(&c->hits, __ATOMIC_RELAXED),
                         (unsigned long long)__atomic_load_n(&c->misses, __ATOMIC_RELAXED),
                         (Py_ssize_t)__atomic_load_n(&c->size, __ATOMIC_RELAXED), (Py_ssize_t)c->nslots);
}

#endif /* TOK_WORD_CACHE_H */
