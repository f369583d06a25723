/* Reading a str's code points as the pipeline's ``scrub_surrogates`` does (a UTF-16 round trip): a high surrogate
 * followed by a low one becomes its character, and any other surrogate becomes U+FFFD. Shared by the compiled
 * cores that take text (mergebpe.c, spbpe.c, unigram.c). */
#ifndef TOKCORE_SCRUB_TEXT_H
#define TOKCORE_SCRUB_TEXT_H

#include <Python.h>
#include <stdint.h>

/* The ``n`` code points of ``data`` (a str's ``kind`` and data) into ``out``, scrubbed; returns how many were
 * written (at most ``n``: a pair is one). ``out`` has room for ``n``. */
static inline Py_ssize_t scrub_code_points(int kind, const void *data, Py_ssize_t n, uint32_t *out) {
    Py_ssize_t k = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) out[k++] = d[i];
        return k;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) {
            if (c <= 0xDBFF && i + 1 < n) {
                uint32_t d = PyUnicode_READ(kind, data, i + 1);
                if (d >= 0xDC00 && d <= 0xDFFF) {
                    out[k++] = 0x10000 + ((c - 0xD800) << 10) + (d - 0xDC00);
                    i++;
                    continue;
                }
            }
            c = 0xFFFD;
        }
        out[k++] = c;
    }
    return k;
}

#endif
