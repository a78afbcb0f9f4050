/*
 * lex.c - the tokenizer and number reader of the spec and the expressions (lex.h).
 *
 * Every read is bounds-checked against len: the text is bytes, possibly with NULs and no
 * final newline, and a token is a (pos, len) slice of it. A number token's extent is found
 * here by the rules the caller picked; its value by strtod_l in a C locale made once per
 * process, so that a host program with a decimal comma still reads "1.01" as written (the
 * process locale only when no C locale could be made).
 */
#define _GNU_SOURCE /* strtod_l, newlocale */
#include "kernels/lex.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static bool has(const char *set, char c)
{
    return set != NULL && c != '\0' && strchr(set, c) != NULL;
}

void gr__lex_init(gr_lex *lx, const char *s, size_t len, const gr_lex_rules *rules)
{
    lx->s = s;
    lx->len = len;
    lx->at = 0;
    lx->line = 1;
    lx->line_start = 0;
    lx->rules = rules;
}

static gr_lex_tok at_pos(const gr_lex *lx, gr_lex_kind kind, size_t pos, size_t len)
{
    gr_lex_tok t;

    memset(&t, 0, sizeof(t));
    t.kind = kind;
    t.pos = pos;
    t.len = len;
    t.line = lx->line;
    t.col = pos - lx->line_start + 1;
    return t;
}

static gr_lex_tok bad(const gr_lex *lx, gr_lex_bad why, size_t i)
{
    gr_lex_tok t = at_pos(lx, GR_LEX_BAD, i, why == GR_LEX_BAD_STRING ? 0 : 1);

    t.bad = why;
    t.bad_at = i;
    return t;
}

/* Whether a word or number may end before s[i]. */
static bool ends_token(const gr_lex *lx, size_t i)
{
    unsigned f = lx->rules->flags;
    char c;

    if (!(f & GR_LEX_STRICT_ENDS) || i >= lx->len)
        return true;
    if ((f & GR_LEX_ARROWS) && gr__lex_arrow_at(lx, i))
        return true;
    c = lx->s[i];
    return gr__lex_is_blank(c) || c == '\n' || has(lx->rules->enders, c);
}

/* The end of the word that starts at s[at]. */
static size_t word_end(const gr_lex *lx, size_t at)
{
    unsigned f = lx->rules->flags;
    size_t i;

    for (i = at + 1; i < lx->len; i++) {
        char d = lx->s[i];

        if ((f & GR_LEX_ARROWS) && gr__lex_arrow_at(lx, i))
            break;
        if (!gr__lex_is_alpha(d) && !gr__lex_is_digit(d) && d != '.' &&
            !(d == '-' && (f & GR_LEX_DASH_IN_WORDS)))
            break;
    }
    return i;
}

/* The end of the number that starts at s[at]: letters, digits and '.' (strtod decides what
 * they mean), and a sign right after an exponent's letter. */
static size_t number_end(const gr_lex *lx, size_t at)
{
    unsigned f = lx->rules->flags;
    bool hex = lx->s[at] == '0' && at + 1 < lx->len &&
               (lx->s[at + 1] == 'x' || lx->s[at + 1] == 'X');
    size_t i;

    for (i = at + 1; i < lx->len; i++) {
        char d = lx->s[i], e = lx->s[i - 1];
        bool exp_letter = (f & GR_LEX_ANY_EXPONENT_SIGN)
                              ? (e == 'e' || e == 'E' || e == 'p' || e == 'P')
                              : hex ? (e == 'p' || e == 'P') : (e == 'e' || e == 'E');

        if ((f & GR_LEX_ARROWS) && gr__lex_arrow_at(lx, i))
            break;
        if (!gr__lex_is_alpha(d) && !gr__lex_is_digit(d) && d != '.' &&
            !((d == '+' || d == '-') && exp_letter))
            break;
    }
    return i;
}

static bool number_starts(const gr_lex *lx, size_t at)
{
    char c = lx->s[at], d = at + 1 < lx->len ? lx->s[at + 1] : '\0';

    if (gr__lex_is_digit(c) || (c == '.' && gr__lex_is_digit(d)))
        return true;
    if (!(lx->rules->flags & GR_LEX_LOOSE_NUMBERS))
        return false;
    return c == '.' || ((c == '+' || c == '-') &&
                        !((lx->rules->flags & GR_LEX_ARROWS) && gr__lex_arrow_at(lx, at)));
}

gr_lex_tok gr__lex_next(gr_lex *lx)
{
    const gr_lex_rules *r = lx->rules;
    bool lines = (r->flags & GR_LEX_LINES) != 0;
    gr_lex_tok t;
    size_t i;
    char c;

    while (lx->at < lx->len &&
           (gr__lex_is_blank(lx->s[lx->at]) || (!lines && lx->s[lx->at] == '\n')))
        lx->at++;
    if (lx->at >= lx->len)
        return at_pos(lx, GR_LEX_END, lx->at, 0);
    c = lx->s[lx->at];
    if (lines && (c == '#' || c == '\n')) {
        /* A comment runs to the end of the line; the token stands where the statement
         * stopped. A NUL byte is refused there too: it means binary data, not text. */
        for (i = lx->at; i < lx->len && lx->s[i] != '\n'; i++)
            if (lx->s[i] == '\0')
                return bad(lx, GR_LEX_BAD_BYTE, i);
        t = at_pos(lx, i == lx->len ? GR_LEX_END : GR_LEX_EOL, lx->at, 0);
        if (i == lx->len) {
            lx->at = i;
            return t;
        }
        lx->at = i + 1;
        lx->line++;
        lx->line_start = lx->at;
        return t;
    }
    for (const char *const *pair = r->pairs; pair != NULL && *pair != NULL; pair++)
        if (lx->at + 1 < lx->len && c == (*pair)[0] && lx->s[lx->at + 1] == (*pair)[1]) {
            t = at_pos(lx, GR_LEX_PUNCT, lx->at, 2);
            lx->at += 2;
            return t;
        }
    if (gr__lex_is_alpha(c)) {
        i = word_end(lx, lx->at);
        if (!ends_token(lx, i))
            return bad(lx, GR_LEX_BAD_IN_WORD, i);
        t = at_pos(lx, GR_LEX_WORD, lx->at, i - lx->at);
    } else if (number_starts(lx, lx->at)) {
        i = number_end(lx, lx->at);
        if (!ends_token(lx, i))
            return bad(lx, GR_LEX_BAD_IN_NUMBER, i);
        t = at_pos(lx, GR_LEX_NUMBER, lx->at, i - lx->at);
    } else if (c == '"' && (r->flags & GR_LEX_STRINGS)) {
        for (i = lx->at + 1;
             i < lx->len && lx->s[i] != '"' && lx->s[i] != '\n' && lx->s[i] != '\0'; i++)
            ;
        if (i >= lx->len || lx->s[i] != '"')
            return bad(lx, GR_LEX_BAD_STRING, lx->at);
        t = at_pos(lx, GR_LEX_STRING, lx->at, i + 1 - lx->at);
    } else if (has(r->punct, c)) {
        t = at_pos(lx, GR_LEX_PUNCT, lx->at, 1);
    } else {
        return bad(lx, GR_LEX_BAD_BYTE, lx->at);
    }
    lx->at += t.len;
    return t;
}

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale = (locale_t)0;

static void make_c_locale(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

gr_lex_num gr__lex_number(const char *s, size_t len, double *out)
{
    char buf[GR_LEX_NUMBER_MAX + 1], *end;
    double v;

    if (len > GR_LEX_NUMBER_MAX)
        return GR_LEX_NUM_TOO_LONG;
    memcpy(buf, s, len);
    buf[len] = '\0';
    pthread_once(&c_locale_once, make_c_locale);
    errno = 0;
    v = c_locale != (locale_t)0 ? strtod_l(buf, &end, c_locale) : strtod(buf, &end);
    if (end != buf + len || len == 0)
        return GR_LEX_NUM_INVALID;
    if (isnan(v) || (isinf(v) && errno != ERANGE))
        return GR_LEX_NUM_NOT_FINITE;
    if (errno == ERANGE && isinf(v))
        return GR_LEX_NUM_OVERFLOW;
    if (errno == ERANGE && v == 0.0)
        return GR_LEX_NUM_UNDERFLOW;
    *out = v;
    return GR_LEX_NUM_OK;
}
