/*
 * utf8_put.h: one code point as UTF-8, for the compiled cores that turn str data into bytes (byte fallback, the
 * byte-level core's scanner input, the Unigram normalizer). Header-only.
 */
#ifndef TOK_UTF8_PUT_H
#define TOK_UTF8_PUT_H

#include <stdint.h>

/* Write ``c`` (at most 0x10FFFF; surrogates are written as their 3-byte form, callers that must refuse them check
 * first) to ``o`` as UTF-8; return the number of bytes, 1 to 4. */
static inline int utf8_put(unsigned char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | (c >> 6));
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

#endif
