/*
 * npy.c - NumPy .npy headers (see npy.h): a strict parser for what NumPy writes, and a
 * writer that produces the very bytes np.save would.
 *
 * The header is untrusted: every read is bounds-checked against `len` (the header text is
 * a slice, never a C string), and every number is checked for overflow before it is used:
 * the header length against the buffer, each dimension against 64 bits, their product, and
 * data_offset + elems * the element's size, so a caller computing a file size from the
 * result cannot wrap.
 *
 * What is accepted is what NumPy's own reader accepts from a file holding a C-order array of
 * one of graphrun's types, minus its laxness where that could hide a mistake: the dict must
 * hold exactly the keys 'descr', 'fortran_order' and 'shape' (NumPy too requires exactly
 * these), once each, in any order, with Python's spacing and an optional trailing comma;
 * shape is a tuple of non-negative decimal integers (with the 'L' suffix Python 2 wrote, in
 * versions 1.0 and 2.0, where NumPy filters it too).
 *
 * Byte order: '<' and '>' say it; '=' means "native order", which the file does not record.
 * NumPy never writes '=' (dtype.str always says '<' or '>'), and np.load reads such a file in
 * the reading host's order, so graphrun does too. '|' (no order) is refused for multi-byte
 * numbers, where NumPy never writes it, and taken as little-endian for V2 (npy.h says why).
 * Data in the other order than the host's is marked `swap`; the caller swaps it on reading.
 */
#include "tools/graphrun/npy.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define ALIGN 64            /* NumPy pads the whole header to a multiple of this */
#define GROWTH_DIGITS 21    /* NumPy's spare room for the first dimension to grow */
#define STRING_MAX 32       /* longest key or descr string worth reading */

static gr_status fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static gr_status fail(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;

    if (why != NULL && why_len > 0) {
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return GR_ERR_INVALID_ARGUMENT;
}

/* The header dict, as a bounded slice; `at` indexes it; `base` is its offset in the file. */
typedef struct dict_cursor {
    const char *s;
    size_t len, at, base;
    char *why;
    size_t why_len;
} dict_cursor;

static void skip_space(dict_cursor *c)
{
    while (c->at < c->len && (c->s[c->at] == ' ' || c->s[c->at] == '\t' ||
                              c->s[c->at] == '\n' || c->s[c->at] == '\r'))
        c->at++;
}

/* What stands at the cursor, for messages: a short run of printable text, or what ends it. */
static const char *found(const dict_cursor *c, char *buf, size_t size)
{
    size_t n = 0;

    if (c->at >= c->len)
        return "the end of the header";
    while (c->at + n < c->len && n < 24 && c->s[c->at + n] > ' ' && c->s[c->at + n] < 0x7f &&
           (n == 0 || !strchr(",:)}]", c->s[c->at + n])))
        n++;
    if (n == 0)
        snprintf(buf, size, "byte 0x%02x", (unsigned char)c->s[c->at]);
    else
        snprintf(buf, size, "'%.*s'", (int)n, c->s + c->at);
    return buf;
}

static gr_status malformed(dict_cursor *c, const char *expected)
{
    char shown[32];

    return fail(c->why, c->why_len,
                "malformed .npy header at byte %zu: expected %s, found %s (is this file "
                "from np.save?)",
                c->base + c->at, expected, found(c, shown, sizeof(shown)));
}

static bool take_char(dict_cursor *c, char ch)
{
    skip_space(c);
    if (c->at < c->len && c->s[c->at] == ch) {
        c->at++;
        return true;
    }
    return false;
}

/* A Python string literal without escapes ('...' or "..."), into out[STRING_MAX + 1]. */
static gr_status take_string(dict_cursor *c, const char *what, char *out)
{
    size_t start, n;
    char q;

    skip_space(c);
    if (c->at >= c->len || (c->s[c->at] != '\'' && c->s[c->at] != '"'))
        return malformed(c, what);
    q = c->s[c->at];
    start = c->at + 1;
    for (n = 0; start + n < c->len && c->s[start + n] != q; n++) {
        char ch = c->s[start + n];
        if (ch < ' ' || ch >= 0x7f || ch == '\\') {
            c->at = start + n;
            return malformed(c, "a plain string");
        }
    }
    if (start + n >= c->len) {
        c->at = start + n;
        return malformed(c, "the end of a string");
    }
    if (n > STRING_MAX)
        return fail(c->why, c->why_len,
                    "malformed .npy header at byte %zu: a string of %zu characters where %s "
                    "was expected",
                    c->base + c->at, n, what);
    memcpy(out, c->s + start, n);
    out[n] = '\0';
    c->at = start + n + 1;
    return GR_OK;
}

static bool take_word(dict_cursor *c, const char *word)
{
    size_t n = strlen(word);

    skip_space(c);
    if (c->len - c->at < n || memcmp(c->s + c->at, word, n) != 0)
        return false;
    /* A whole word: "Trueish" is not True. */
    if (c->at + n < c->len) {
        char next = c->s[c->at + n];
        if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
            (next >= '0' && next <= '9') || next == '_')
            return false;
    }
    c->at += n;
    return true;
}

/* One dimension: a non-negative decimal integer ('L' allowed where NumPy filters it). */
static gr_status take_dim(dict_cursor *c, bool long_suffix, uint64_t *out)
{
    size_t start;
    uint64_t v = 0;
    char shown[32];

    skip_space(c);
    start = c->at;
    if (c->at < c->len && c->s[c->at] == '-' && c->at + 1 < c->len && c->s[c->at + 1] >= '0' &&
        c->s[c->at + 1] <= '9')
        return fail(c->why, c->why_len,
                    "malformed .npy header: shape has a negative dimension %s",
                    found(c, shown, sizeof(shown)));
    while (c->at < c->len && c->s[c->at] >= '0' && c->s[c->at] <= '9') {
        unsigned d = (unsigned)(c->s[c->at] - '0');

        if (v > (UINT64_MAX - d) / 10) {
            c->at = start;
            return fail(c->why, c->why_len,
                        "malformed .npy header: shape dimension %s does not fit in 64 bits",
                        found(c, shown, sizeof(shown)));
        }
        v = v * 10 + d;
        c->at++;
    }
    /* Python 3 has no leading zeros ("007" is a syntax error); NumPy never writes them. */
    if (c->at == start || (c->at - start > 1 && c->s[start] == '0')) {
        c->at = start;
        return malformed(c, "a shape of non-negative integers");
    }
    if (long_suffix && c->at < c->len && c->s[c->at] == 'L')
        c->at++;
    if (c->at < c->len && !strchr(" \t\r\n,)", c->s[c->at])) {
        c->at = start;
        return malformed(c, "a shape of non-negative integers");
    }
    *out = v;
    return GR_OK;
}

/* '(' [dim {',' dim} [',']] ')': a tuple, as Python writes it ("(5,)", never "(5)"). */
static gr_status take_shape(dict_cursor *c, bool long_suffix, gr_npy_header *h)
{
    uint64_t dim = 0;
    gr_status st;
    bool comma = false;

    if (!take_char(c, '('))
        return malformed(c, "a shape tuple such as (2, 3) for 'shape'");
    h->ndim = 0;
    for (;;) {
        if (take_char(c, ')'))
            break;
        if (h->ndim > 0 && !comma)
            return malformed(c, "',' or ')' in the shape");
        if ((st = take_dim(c, long_suffix, &dim)) != GR_OK)
            return st;
        if (h->ndim == GR_NPY_MAX_DIMS)
            return fail(c->why, c->why_len,
                        ".npy array has more than %d dimensions: graphrun reads at most %d",
                        GR_NPY_MAX_DIMS, GR_NPY_MAX_DIMS);
        h->shape[h->ndim++] = dim;
        comma = take_char(c, ',');
    }
    if (h->ndim == 1 && !comma)
        return fail(c->why, c->why_len,
                    "malformed .npy header: shape (%llu) is an integer, not a tuple (a 1-d "
                    "shape is written (%llu,))",
                    (unsigned long long)h->shape[0], (unsigned long long)h->shape[0]);
    return GR_OK;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_ORDER '>'
#else
#define HOST_ORDER '<'
#endif

/* The types graphrun reads: NumPy's kind and size for each (the descr np.save writes is the
 * host's order, kind and size), named as gr_dtype_name does. A table of its own, so that
 * this file stays pure and links alone (the fuzz target). */
static const struct {
    gr_dtype dtype;
    char kind;
    unsigned bytes;
    const char *name, *astype;
} types[] = {
    {GR_DTYPE_FLOAT32, 'f', 4, "float32", "a.astype(np.float32)"},
    {GR_DTYPE_FLOAT16, 'f', 2, "float16", "a.astype(np.float16)"},
    {GR_DTYPE_BFLOAT16, 'V', 2, "bfloat16", "a.astype(ml_dtypes.bfloat16)"},
    {GR_DTYPE_FLOAT64, 'f', 8, "float64", "a.astype(np.float64)"},
    {GR_DTYPE_INT32, 'i', 4, "int32", "a.astype(np.int32)"},
    {GR_DTYPE_UINT8, 'u', 1, "uint8", "a.astype(np.uint8)"},
};
#define N_TYPES (sizeof(types) / sizeof(types[0]))

static size_t type_index(gr_dtype t)
{
    size_t i = 0;

    while (i < N_TYPES && types[i].dtype != t)
        i++;
    return i;
}

static const char *type_name(gr_dtype t)
{
    size_t i = type_index(t);

    return i < N_TYPES ? types[i].name : "unknown";
}

const char *gr_npy_astype(gr_dtype t)
{
    size_t i = type_index(t);

    return i < N_TYPES ? types[i].astype : "a.astype(...)";
}

/* What a dtype string means, for messages: "float64", "int32", ... */
static const char *dtype_name(const char *descr, char *buf, size_t size)
{
    char order = descr[0], kind;
    unsigned bytes = 0;
    const char *word = NULL, *ord = "";
    int n = 0;

    if (order == '\0' || !strchr("<>|=", order) || descr[1] == '\0')
        return "not a dtype NumPy writes";
    kind = descr[1];
    if (sscanf(descr + 2, "%u%n", &bytes, &n) != 1 || descr[2 + n] != '\0')
        bytes = 0;
    switch (kind) {
    case 'f': word = "float"; break;
    case 'i': word = "int"; break;
    case 'u': word = "uint"; break;
    case 'c': word = "complex"; break;
    case 'b': return "bool";
    case 'U': return "unicode strings";
    case 'S': return "byte strings";
    case 'O': return "Python objects";
    case 'V': return "raw bytes";
    case 'M': return "datetime64";
    case 'm': return "timedelta64";
    default: return "not a dtype NumPy writes";
    }
    if (bytes == 0 || bytes > 32)
        return "not a dtype NumPy writes";
    if (order == '>')
        ord = "big-endian ";
    snprintf(buf, size, "%s%s%u", ord, word, bytes * 8);
    return buf;
}

#define READS "graphrun reads float32, float16, bfloat16, float64, int32 and uint8"

/* The element type and byte order of `descr`, into h; else a refusal saying how to convert. */
static gr_status check_descr(const char *descr, gr_npy_header *h, char *why, size_t why_len)
{
    char name[40], order = descr[0];

    /* Every type here is an order, a kind and a one-digit size, as NumPy spells them. */
    if (strlen(descr) == 3 && strchr("<>|=", order) && descr[2] >= '1' && descr[2] <= '9') {
        unsigned bytes = (unsigned)(descr[2] - '0');

        for (size_t i = 0; i < N_TYPES; i++) {
            if (types[i].kind != descr[1] || types[i].bytes != bytes)
                continue;
            /* '|' for a number of more than one byte: an order NumPy never writes. */
            if (order == '|' && bytes > 1 && types[i].kind != 'V')
                return fail(why, why_len,
                            "dtype '%s' (%s of unknown byte order) is not supported: NumPy "
                            "writes '<%c%u' or '>%c%u'; convert with a.astype('<%c%u')",
                            descr, types[i].name, descr[1], bytes, descr[1],
                            bytes, descr[1], bytes);
            h->dtype = types[i].dtype;
            /* The data's order: '=' and one byte are the host's; '|V2' is little-endian. */
            h->swap = (order == '=' || bytes == 1 ? HOST_ORDER
                       : order == '|'             ? '<'
                                                  : order) != HOST_ORDER;
            memcpy(h->descr, descr, 4); /* the three characters and the NUL */
            return GR_OK;
        }
    }
    if ((order == '<' || order == '>' || order == '=') && strcmp(descr + 1, "u2") == 0)
        return fail(why, why_len,
                    "dtype '%s' (uint16) is not supported: " READS "; convert with "
                    "a.astype(...) to the type the graph takes (bfloat16 bit patterns held "
                    "as uint16: save a.view(ml_dtypes.bfloat16))",
                    descr);
    return fail(why, why_len,
                "dtype '%s' (%s) is not supported: " READS "; convert with a.astype(...) to "
                "the type the graph takes, e.g. a.astype(np.float32)",
                descr, dtype_name(descr, name, sizeof(name)));
}

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, KEY_COUNT };

/* The dict: keys in any order, each once, an optional trailing comma, then only padding. */
static gr_status parse_dict(dict_cursor *c, bool long_suffix, gr_npy_header *h)
{
    static const char *const keys[KEY_COUNT] = {"descr", "fortran_order", "shape"};
    char key[STRING_MAX + 1], descr[STRING_MAX + 1] = "";
    bool seen[KEY_COUNT] = {false, false, false}, fortran = false;
    gr_status st;
    int k;

    if (!take_char(c, '{'))
        return malformed(c, "'{' (a .npy header is a Python dict)");
    for (;;) {
        if (take_char(c, '}'))
            break;
        if ((st = take_string(c, "a key ('descr', 'fortran_order' or 'shape')", key)) != GR_OK)
            return st;
        for (k = 0; k < KEY_COUNT && strcmp(key, keys[k]) != 0; k++)
            ;
        if (k == KEY_COUNT)
            return fail(c->why, c->why_len,
                        "malformed .npy header: unknown key '%s' (a .npy header has 'descr', "
                        "'fortran_order' and 'shape')",
                        key);
        if (seen[k])
            return fail(c->why, c->why_len, "malformed .npy header: key '%s' appears twice",
                        key);
        seen[k] = true;
        if (!take_char(c, ':'))
            return malformed(c, "':' after the key");
        if (k == KEY_DESCR) {
            skip_space(c);
            if (c->at < c->len && c->s[c->at] == '[')
                return fail(c->why, c->why_len,
                            "structured dtype (a list of fields) is not supported: graphrun "
                            "reads arrays of one plain type; save each field on its own, "
                            "e.g. np.save(path, a['x'])");
            if ((st = take_string(c, "a dtype string such as '<f4' for 'descr'", descr)) !=
                GR_OK)
                return st;
        } else if (k == KEY_FORTRAN) {
            if (take_word(c, "True"))
                fortran = true;
            else if (!take_word(c, "False"))
                return malformed(c, "True or False for 'fortran_order'");
        } else if ((st = take_shape(c, long_suffix, h)) != GR_OK) {
            return st;
        }
        if (take_char(c, '}'))
            break;
        if (!take_char(c, ','))
            return malformed(c, "',' or '}' after a value");
    }
    skip_space(c);
    if (c->at < c->len)
        return malformed(c, "only spaces and a newline after the dict");
    for (k = 0; k < KEY_COUNT; k++)
        if (!seen[k])
            return fail(c->why, c->why_len, "malformed .npy header: no '%s' key", keys[k]);
    if ((st = check_descr(descr, h, c->why, c->why_len)) != GR_OK)
        return st;
    if (fortran)
        return fail(c->why, c->why_len,
                    "Fortran-ordered array (fortran_order: True) is not supported: graphrun "
                    "reads C order; save np.ascontiguousarray(a)");
    return GR_OK;
}

gr_status gr_npy_parse_header(const void *buf, size_t len, gr_npy_header *out, char *why,
                              size_t why_len)
{
    const unsigned char *b = buf;
    uint64_t hlen, start, elems = 1;
    gr_npy_header h;
    dict_cursor c;
    gr_status st;

    if (why != NULL && why_len > 0)
        why[0] = '\0';
    if (out == NULL || (buf == NULL && len > 0))
        return fail(why, why_len, "gr_npy_parse_header: NULL argument");
    if (len > 0 && memcmp(b, MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) != 0)
        return fail(why, why_len,
                    "not a .npy file: it does not start with \"\\x93NUMPY\" (save it with "
                    "np.save)");
    if (len < MAGIC_LEN + 2)
        return fail(why, why_len, "truncated .npy file: %zu bytes, too short for a header",
                    len);
    if ((b[6] != 1 && b[6] != 2 && b[6] != 3) || b[7] != 0)
        return fail(why, why_len,
                    ".npy format version %u.%u is not supported: graphrun reads 1.0, 2.0 and "
                    "3.0 (np.save writes 1.0)",
                    b[6], b[7]);
    /* Version 1.0 has a 2-byte header length, 2.0 and 3.0 a 4-byte one; both little-endian. */
    start = b[6] == 1 ? 10 : 12;
    if (len < start)
        return fail(why, why_len, "truncated .npy file: %zu bytes, too short for a header",
                    len);
    hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8;
    if (b[6] != 1)
        hlen |= (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
    if (hlen > len - start)
        return fail(why, why_len,
                    "truncated .npy header: it says %llu bytes follow the %llu-byte preamble, "
                    "but only %llu bytes were given",
                    (unsigned long long)hlen, (unsigned long long)start,
                    (unsigned long long)(len - start));
    memset(&h, 0, sizeof(h));
    c.s = (const char *)b + start;
    c.len = (size_t)hlen;
    c.at = 0;
    c.base = (size_t)start;
    c.why = why;
    c.why_len = why_len;
    /* Python 2 wrote 3L for big ints; NumPy strips the L from versions 1.0 and 2.0. */
    if ((st = parse_dict(&c, b[6] != 3, &h)) != GR_OK)
        return st;
    for (uint32_t i = 0; i < h.ndim; i++)
        if (h.shape[i] == 0)
            elems = 0;
    for (uint32_t i = 0; i < h.ndim && elems != 0; i++) {
        if (elems > UINT64_MAX / h.shape[i])
            return fail(why, why_len,
                        ".npy shape has more elements than 64 bits can count (dimension %u "
                        "is %llu)",
                        i, (unsigned long long)h.shape[i]);
        elems *= h.shape[i];
    }
    h.elems = elems;
    h.data_offset = start + hlen;
    if (elems > (UINT64_MAX - h.data_offset) / types[type_index(h.dtype)].bytes)
        return fail(why, why_len,
                    ".npy shape has %llu elements: more %s bytes than a file can hold",
                    (unsigned long long)elems, type_name(h.dtype));
    *out = h;
    return GR_OK;
}

static unsigned digits(uint64_t v)
{
    unsigned n = 1;

    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

size_t gr_npy_format_header(gr_dtype dtype, const uint64_t *shape, uint32_t ndim, char *buf,
                            size_t size)
{
    char dict[GR_NPY_MAX_DIMS * 22 + 128], descr[8] = "";
    size_t n, total, pad, t = type_index(dtype);
    int w;

    if (t < N_TYPES)
        snprintf(descr, sizeof(descr), "%c%c%u", types[t].bytes == 1 ? '|' : HOST_ORDER,
                 types[t].kind, types[t].bytes);
    if (descr[0] == '\0' || ndim > GR_NPY_MAX_DIMS || (ndim > 0 && shape == NULL) ||
        buf == NULL)
        return 0;
    /* What np.save writes: repr() of the dict with its keys sorted, and of the tuple. */
    n = (size_t)snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                         descr);
    for (uint32_t i = 0; i < ndim; i++) {
        w = snprintf(dict + n, sizeof(dict) - n, "%s%llu", i ? ", " : "",
                     (unsigned long long)shape[i]);
        n += (size_t)w;
    }
    n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s), }", ndim == 1 ? "," : "");
    /* Room for the first dimension to grow to GROWTH_DIGITS digits in place (NumPy 1.23+). */
    if (ndim > 0)
        for (unsigned i = digits(shape[0]); i < GROWTH_DIGITS; i++)
            dict[n++] = ' ';
    /* Then spaces and '\n' up to a multiple of ALIGN; a full ALIGN when already aligned. */
    pad = ALIGN - (10 + n + 1) % ALIGN;
    total = 10 + n + pad + 1;
    if (total > size || total - 10 > UINT16_MAX)
        return 0;
    memcpy(buf, MAGIC, MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

gr_status gr_npy_check_dtype(const gr_npy_header *h, gr_dtype want, const char *what,
                             const char *port, char *why, size_t why_len)
{
    if (why != NULL && why_len > 0)
        why[0] = '\0';
    if (h->dtype == want)
        return GR_OK;
    /* A V2 array read as anything else: what the bytes are is the user's to say. */
    if (h->dtype == GR_DTYPE_BFLOAT16)
        return fail(why, why_len,
                    "%s holds 2-byte raw values ('%s': what np.save writes for "
                    "ml_dtypes.bfloat16, read only as bfloat16) but %s is %s: convert with "
                    "a.view(ml_dtypes.bfloat16).%s or change the spec's buffer type",
                    what, h->descr, port, type_name(want), gr_npy_astype(want) + 2);
    return fail(why, why_len,
                "%s holds %s but %s is %s: convert with %s or change the spec's buffer type",
                what, type_name(h->dtype), port, type_name(want), gr_npy_astype(want));
}

void gr_npy_swap(void *data, uint64_t elems, uint32_t size)
{
    unsigned char *p = data;

    for (uint64_t i = 0; i < elems; i++, p += size) {
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;

        switch (size) {
        case 2:
            memcpy(&u16, p, 2);
            u16 = __builtin_bswap16(u16);
            memcpy(p, &u16, 2);
            break;
        case 4:
            memcpy(&u32, p, 4);
            u32 = __builtin_bswap32(u32);
            memcpy(p, &u32, 4);
            break;
        case 8:
            memcpy(&u64, p, 8);
            u64 = __builtin_bswap64(u64);
            memcpy(p, &u64, 8);
            break;
        default:
            return; /* one byte: nothing to swap */
        }
    }
}
