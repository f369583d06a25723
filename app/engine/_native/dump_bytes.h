/*
 * dump_bytes.h: the little-endian integer reads and writes and the checksum of the compiled models' dump formats
 * (Model.dump / Model.load in mergebpe.c and spbpe.c). Header-only; each format passes its own checksum seed.
 */
#ifndef TOK_DUMP_BYTES_H
#define TOK_DUMP_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "hash_mix.h"

static inline void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Checksum of p[0..n) under a format's seed: words of 8 bytes (little-endian) and a zero-padded tail, mixed in
 * order. */
static inline uint64_t dump_checksum(const unsigned char *p, size_t n, uint64_t seed) {
    uint64_t h = seed ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) h = mix64(h ^ get_u64(p + i)) + i;
    uint64_t tail = 0;
    for (size_t k = 0; i + k < n; k++) tail |= (uint64_t)p[i + k] << (8 * k);
    return mix64(h ^ tail ^ 0x9E3779B97F4A7C15ULL);
}

#endif
