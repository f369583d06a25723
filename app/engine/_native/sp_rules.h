/* sp_rules.h: which multi-character pieces the SentencePiece-style learners may learn (the compiled form of
 * app/engine/training/piece_rules.py, SentencePiece's trainer's piece validity; that module's docstring states the
 * rules). A piece is scanned left to right with sp_rule_step; a failed step fails every extension to the right too
 * (the prefix-closed rules), and sp_rule_end_ok adds the one rule that is not (no trailing marker without
 * split_by_whitespace). The caller bounds the length. */
#ifndef SP_RULES_H
#define SP_RULES_H
#include <stdint.h>
#include "sp_scripts.h"

/* flags: the bits of PieceRules.native() */
#define SP_RULE_SPLIT_DIGITS 1
#define SP_RULE_SPLIT_SCRIPT 2
#define SP_RULE_SPLIT_NUMBER 4
#define SP_RULE_SPLIT_WHITESPACE 8
#define SP_RULE_FORBIDDEN 16

typedef struct {
    int64_t marker;  /* the whitespace marker's code point, or -1 */
    int flags;
    int64_t max_len; /* longest piece in characters, or -1 */
} SpRules;

/* A scan: the script of the last character that had one (-1: any). */
typedef struct {
    int prev;
} SpScan;

static inline int sp_is_decimal(uint32_t c) { return (c >= '0' && c <= '9') || (c >= 0xFF10 && c <= 0xFF19); }

/* Character c at position pos of a piece of two or more characters: 0 if the rules still hold, -1 if they fail
 * (for this piece and every extension of it). */
static inline int sp_rule_step(const SpRules *r, SpScan *st, uint32_t pos, uint32_t c)
{
    if ((int64_t)c == r->marker)
        return pos > 0 && (r->flags & SP_RULE_SPLIT_WHITESPACE) ? -1 : 0;
    if ((r->flags & SP_RULE_FORBIDDEN) &&
        (c == 0 || c == 0x1F || c == ' ' || c == 0x2585 || (c >= 0xD800 && c <= 0xDFFF)))
        return -1;
    int digit = sp_is_decimal(c);
    if (digit && (r->flags & SP_RULE_SPLIT_DIGITS))
        return -1;
    if (!(r->flags & SP_RULE_SPLIT_SCRIPT))
        return 0;
    int s;
    if (digit && !(r->flags & SP_RULE_SPLIT_NUMBER)) {
        s = -1;
    } else {
        s = (int)sp_script_of(c);
        if (s == SP_SCRIPT_HIRAGANA || s == SP_SCRIPT_KATAKANA || c == 0x30FC)
            s = SP_SCRIPT_HAN;
        else if (s == SP_SCRIPT_INHERITED)
            s = st->prev;
    }
    if (s >= 0 && st->prev >= 0 && s != st->prev)
        return -1;
    st->prev = s;
    return 0;
}

/* The rule on a whole piece of len >= 2 characters ending with `last` that the scan does not cover. */
static inline int sp_rule_end_ok(const SpRules *r, uint32_t last, int64_t len)
{
    return (r->flags & SP_RULE_SPLIT_WHITESPACE) || len < 2 || (int64_t)last != r->marker;
}
#endif
