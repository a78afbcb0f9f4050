/*
 * lex.h - the one tokenizer and number reader of graphrun's two languages: the graph spec
 * (graph/spec_*.c) and the expressions (kernels/expr_parse.c). Both read untrusted bytes
 * [0, len), never a C string, and both read numbers as C reads floats in the C locale,
 * whatever locale the host program set.
 *
 * The languages share the character classes, the number rules and the reader; where their
 * tokens differ, the caller's gr_lex_rules say so (flags, punctuation). The spec's rules
 * and the expressions' differ in these ways, each kept as it was:
 *   - a spec word may hold '-' (a buffer "scale-1"); an expression name may not (a minus);
 *   - a spec number may start with '+', '-' or '.' (the sign is the number's; "." alone is
 *     then an invalid number); an expression number starts at a digit or at '.' before a
 *     digit (a sign is an operator there);
 *   - in a spec number a sign may follow any of e, E, p, P; in an expression it follows e
 *     or E in a decimal number and p or P in a hexadecimal one ("0x1e-3" is 0x1e minus 3);
 *   - a spec word or number must be followed by a blank, punctuation, a comment or the end
 *     ("2$" is refused at '$' "in a number"); an expression's token just ends there;
 *   - in a spec, lines and '#' comments are tokens; in an expression a newline is a blank.
 * The lexer reports what is wrong as a kind and a byte offset; the words of the message are
 * the caller's, as each language words its own.
 */
#ifndef GR_KERNELS_LEX_H
#define GR_KERNELS_LEX_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest number token: far more digits than a float64 needs (17 round-trip it). */
#define GR_LEX_NUMBER_MAX 63

/* gr_lex_rules.flags */
enum {
    GR_LEX_LINES = 1u << 0,         /* '\n' is a token (GR_LEX_EOL), '#' starts a comment that
                                       runs to it; without: '\n' is a blank */
    GR_LEX_STRINGS = 1u << 1,       /* "...": no escapes, no newline, no NUL */
    GR_LEX_DASH_IN_WORDS = 1u << 2, /* '-' inside words */
    GR_LEX_ARROWS = 1u << 3,        /* "->" ends a word or a number and signs no number */
    GR_LEX_LOOSE_NUMBERS = 1u << 4, /* a number starts at '+', '-' or '.' too (else at a
                                       digit, or at '.' before one) */
    GR_LEX_ANY_EXPONENT_SIGN = 1u << 5, /* a sign after e, E, p or P stays in a number (else
                                           after e/E in decimal, p/P in "0x" numbers) */
    GR_LEX_STRICT_ENDS = 1u << 6,   /* a word or number ends at a blank, a newline, the end
                                       or a byte of `enders`; else it is GR_LEX_BAD */
};

typedef struct gr_lex_rules {
    unsigned flags;
    const char *punct;        /* bytes that are tokens by themselves */
    const char *const *pairs; /* two-byte tokens, tried before everything but blanks and
                                 lines; NULL-terminated, or NULL for none */
    const char *enders;       /* GR_LEX_STRICT_ENDS: what may follow a word or number */
} gr_lex_rules;

typedef enum gr_lex_kind {
    GR_LEX_END,    /* the end of the text (with GR_LEX_LINES, also a last unended line) */
    GR_LEX_EOL,    /* a newline, or a comment and its newline */
    GR_LEX_WORD,   /* [A-Za-z_][A-Za-z0-9_.]* ('-' too with GR_LEX_DASH_IN_WORDS) */
    GR_LEX_NUMBER, /* the extent only: gr__lex_number reads it */
    GR_LEX_STRING, /* the quotes included */
    GR_LEX_PUNCT,  /* a byte of `punct`, or one of `pairs` */
    GR_LEX_BAD,    /* `bad` says what, at `bad_at`; the cursor stays where it was */
} gr_lex_kind;

typedef enum gr_lex_bad {
    GR_LEX_BAD_BYTE,      /* a byte no token starts with (a NUL in a comment included) */
    GR_LEX_BAD_IN_WORD,   /* GR_LEX_STRICT_ENDS: a byte that cannot end a word */
    GR_LEX_BAD_IN_NUMBER, /* ... or a number */
    GR_LEX_BAD_STRING,    /* a string the line does not close; bad_at is its quote */
} gr_lex_bad;

typedef struct gr_lex_tok {
    gr_lex_kind kind;
    size_t pos, len;  /* in the text; EOL and END: where the statement stopped, length 0;
                         BAD: bad_at, length 1 (0 for BAD_STRING) */
    size_t line, col; /* of pos: 1-based, the column in bytes */
    gr_lex_bad bad;
    size_t bad_at;
} gr_lex_tok;

/* The cursor: the next token starts at or after `at`. Callers may move it (to skip a line,
 * to look ahead and come back), keeping line and line_start true. */
typedef struct gr_lex {
    const char *s;
    size_t len;
    size_t at, line, line_start;
    const gr_lex_rules *rules;
} gr_lex;

/* What gr__lex_number makes of a number token. */
typedef enum gr_lex_num {
    GR_LEX_NUM_OK,
    GR_LEX_NUM_TOO_LONG,   /* over GR_LEX_NUMBER_MAX characters */
    GR_LEX_NUM_INVALID,    /* not C float syntax, read whole (or empty) */
    GR_LEX_NUM_NOT_FINITE, /* nan or inf as written ("-inf") */
    GR_LEX_NUM_OVERFLOW,   /* finite as written, infinite as a double (1e999) */
    GR_LEX_NUM_UNDERFLOW,  /* nonzero as written, 0 as a double (1e-999) */
} gr_lex_num;

static inline bool gr__lex_is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static inline bool gr__lex_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Blanks between tokens: space, tab, carriage return (and '\n' without GR_LEX_LINES). */
static inline bool gr__lex_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* A cursor at the start of text[0, len), line 1. */
void gr__lex_init(gr_lex *lx, const char *s, size_t len, const gr_lex_rules *rules);

/* The token at the cursor, which moves past it (not past a GR_LEX_BAD one). Any thread;
 * one cursor is one thread's. */
gr_lex_tok gr__lex_next(gr_lex *lx);

/* Whether "->" is at s[i] (GR_LEX_ARROWS' token). */
static inline bool gr__lex_arrow_at(const gr_lex *lx, size_t i)
{
    return i + 1 < lx->len && lx->s[i] == '-' && lx->s[i + 1] == '>';
}

/* The number s[0, len) as strtod reads it in the C locale, whole, into *out when
 * GR_LEX_NUM_OK (a finite double; a subnormal one included). Any thread. */
gr_lex_num gr__lex_number(const char *s, size_t len, double *out);

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_LEX_H */
