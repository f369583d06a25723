/*
 * bytes_hash.h: hashing and comparing short byte strings, shared by the encoding core (tokcore.c) and the trainer
 * (trainer.c). Header-only; every function needs n >= 1.
 */
#ifndef TOK_BYTES_HASH_H
#define TOK_BYTES_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The last 1..8 bytes of a key folded into 64 bits (with the length mixed in by the caller, distinct keys of the
 * same length give distinct values). Fixed-size memcpy compiles to plain loads. */
static inline uint64_t load_tail(const uint8_t *p, size_t n)
{
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + n - 4, 4);
        return ((uint64_t)a << 32) | b;
    }
    return ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
}

/* The 128-bit product of a and b folded to 64 bits (low half xor high half): one multiplication spreads every
 * input bit over most output bits. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* A 64-bit hash of p[0..n) (n >= 1); its bits are used independently (slot index, filter word and bits, tags).
 * Keys of up to 8 bytes -- nearly every BPE candidate -- take one folded multiplication of their tail and length:
 * about half the arithmetic of the mixing chain that longer keys go through (merging about 7 % faster in
 * a harness over the 19,529 distinct merged pieces of the bench's 96 documents, o200k_base; docs/performance.md).
 * The rank table image and the trainer's tables depend on it: a change is caught by the image's probe hash, and
 * needs FORMAT_VERSION in app/engine/artifact_cache.py bumped so that cached images are rewritten. */
static inline uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    if (n <= 8)
        return fold_mul(load_tail(p, n) ^ ((uint64_t)n * 0x9E3779B97F4A7C15ull), 0xBF58476D1CE4E5B9ull);
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull;
    while (n > 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    h = (h ^ load_tail(p, n)) * 0x94D049BB133111EBull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    return h;
}

/* a[0..n) == b[0..n) for n >= 1, without a libc call for the short keys BPE looks up. */
static inline int bytes_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
    while (n > 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    return load_tail(a, n) == load_tail(b, n); /* covers every byte of a 1..8-byte tail */
}

#endif /* TOK_BYTES_HASH_H */
