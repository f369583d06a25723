/*
 * hash_mix.h: the 64-bit finalizer (MurmurHash3's fmix64) that the compiled cores and the trainer use to spread
 * integer keys (ids, code points, node/label pairs) over their hash tables. Header-only.
 */
#ifndef TOK_HASH_MIX_H
#define TOK_HASH_MIX_H

#include <stdint.h>

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

#endif
