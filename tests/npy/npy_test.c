/*
 * npy_test.c - .npy headers (tools/graphrun/npy.c): headers NumPy wrote are read as NumPy
 * reads them (every element type, either byte order), formatting writes the very bytes
 * np.save writes, format and parse round-trip for many shapes and types, a port's type is
 * checked with a message that says how to convert, byte swapping, and every refusal says
 * what it found and what to do.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testing.h"
#include "tools/graphrun/npy.h"

/*
 * Headers written by NumPy 1.24.2 (python3 -c 'import io, numpy as np; f = io.BytesIO(); ...'),
 * cut at the end of the header: the magic and header length, the dict, then NumPy's padding.
 */
/* np.save(f, np.float32(1.5)) */
static const char np_f4_0d[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"
    "                                                              \n";
/* np.save(f, np.zeros((0,), np.float32)) */
static const char np_f4_empty[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }"
    "                                                            \n";
/* np.save(f, np.arange(7, dtype=np.float32)) */
static const char np_f4_7[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }"
    "                                                            \n";
/* np.save(f, np.zeros((3, 4), np.float32)) */
static const char np_f4_3x4[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
    "                                                          \n";
/* np.save(f, np.zeros((2, 3, 4), np.float32)) */
static const char np_f4_2x3x4[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }"
    "                                                       \n";
/* np.lib.format.write_array_header_1_0(f, {'descr': '<f4', 'fortran_order': False,
 *                                           'shape': (1 << 40, 3)}) */
static const char np_f4_big[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 3), }"
    "                                              \n";
/* np.lib.format.write_array_header_2_0(f, {'descr': '<f4', 'fortran_order': False,
 *                                           'shape': (5, 6)}) */
static const char np_f4_v2[] = "\x93NUMPY\x02\x00t\x00\x00\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 6), }"
    "                                                        \n";
/* np.lib.format._write_array_header(f, {'descr': '<f4', 'fortran_order': False,
 *                                        'shape': (8,)}, (3, 0)) */
static const char np_f4_v3[] = "\x93NUMPY\x03\x00t\x00\x00\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }"
    "                                                          \n";
/* np.save(f, np.zeros(3)) */
static const char np_f8[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, np.int32)) */
static const char np_i4[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, np.uint8)) */
static const char np_u1[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, '>f4')) */
static const char np_f4_big_endian[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, np.float16)) */
static const char np_f2[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, np.complex64)) */
static const char np_c8[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, '>f2')) */
static const char np_f2_big_endian[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '>f2', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros((2, 3), '>f8')) */
static const char np_f8_big_endian[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '>f8', 'fortran_order': False, 'shape': (2, 3), }"
    "                                                          \n";
/* np.save(f, np.zeros(3, '>i4')) */
static const char np_i4_big_endian[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros((2, 2), ml_dtypes.bfloat16)), ml_dtypes 0.5.4 (and NumPy 2.4 with
 * ml_dtypes 0.7 writes the same) */
static const char np_bf16[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<V2', 'fortran_order': False, 'shape': (2, 2), }"
    "                                                          \n";
/* np.save(f, np.zeros(3, ml_dtypes.bfloat16).astype(np.dtype(ml_dtypes.bfloat16)
 *                                                   .newbyteorder('>'))) */
static const char np_bf16_big_endian[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '>V2', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.load(a_bfloat16_file)): np.load gives raw '|V2' bytes */
static const char np_v2_reloaded[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '|V2', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, '<u2')) */
static const char np_u2[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, np.int64)) */
static const char np_i8[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.zeros(3, bool)) */
static const char np_b1[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
/* np.save(f, np.asfortranarray(np.zeros((2, 3), np.float32))) */
static const char np_fortran[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"
    "                                                           \n";
/* np.save(f, np.zeros(2, [('a', '<f4'), ('b', '<f4')])) */
static const char np_structured[] = "\x93NUMPY\x01\x00v\x00"
    "{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (2,), }"
    "                                     \n";

#define LEN(a) (sizeof(a) - 1)

/* Parse `len` bytes, expecting success with this shape. */
static void expect_shape(const char *buf, size_t len, uint32_t ndim, const uint64_t *shape,
                         uint64_t elems, uint64_t data_offset)
{
    gr_npy_header h;
    char why[256] = "";

    if (gr_npy_parse_header(buf, len, &h, why, sizeof(why)) != GR_OK)
        GR_TEST_FAIL("refused: %s", why);
    ASSERT_EQ(h.ndim, ndim);
    for (uint32_t i = 0; i < ndim; i++)
        ASSERT_EQ_U64(h.shape[i], shape[i]);
    ASSERT_EQ_U64(h.elems, elems);
    ASSERT_EQ_U64(h.data_offset, data_offset);
}

/* Parse `len` bytes, expecting success with this element type and byte order. */
static void expect_type(const char *buf, size_t len, gr_dtype dtype, bool swap)
{
    gr_npy_header h;
    char why[256] = "";

    if (gr_npy_parse_header(buf, len, &h, why, sizeof(why)) != GR_OK)
        GR_TEST_FAIL("refused: %s", why);
    if (h.dtype != dtype || h.swap != swap)
        GR_TEST_FAIL("'%s': dtype %d swap %d, want dtype %d swap %d", h.descr, (int)h.dtype,
                     (int)h.swap, (int)dtype, (int)swap);
    ASSERT_TRUE(memcmp(h.descr, buf + 21, 3) == 0); /* after "{'descr': '" */
}

/* Parse `len` bytes, expecting the refusal `want`, word for word. */
static void refuse(const char *buf, size_t len, const char *want)
{
    gr_npy_header h;
    char why[256] = "";

    ASSERT_STATUS(gr_npy_parse_header(buf, len, &h, why, sizeof(why)), GR_ERR_INVALID_ARGUMENT);
    if (strcmp(why, want) != 0)
        GR_TEST_FAIL("message:\n  got:  %s\n  want: %s", why, want);
}

/* A header of format `major`.0 around the dict text `dict`, ending in '\n' (not padded). */
static size_t make_header(unsigned major, const char *dict, char *buf, size_t size)
{
    size_t start = major == 1 ? 10 : 12, n = strlen(dict), hlen = n + 1;

    ASSERT_LE_U64(start + hlen, size);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (char)major;
    buf[7] = 0;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)((hlen >> 8) & 0xff);
    if (major != 1) {
        buf[10] = (char)((hlen >> 16) & 0xff);
        buf[11] = (char)((hlen >> 24) & 0xff);
    }
    memcpy(buf + start, dict, n);
    buf[start + n] = '\n';
    return start + hlen;
}

static void refuse_dict(unsigned major, const char *dict, const char *want)
{
    char buf[1024];
    size_t len = make_header(major, dict, buf, sizeof(buf));

    refuse(buf, len, want);
}

static void accept_dict(unsigned major, const char *dict, uint32_t ndim, const uint64_t *shape)
{
    char buf[1024];
    size_t len = make_header(major, dict, buf, sizeof(buf));
    uint64_t elems = 1;

    for (uint32_t i = 0; i < ndim; i++)
        elems *= shape[i];
    expect_shape(buf, len, ndim, shape, elems, len);
}

#define F4(shape) "{'descr': '<f4', 'fortran_order': False, 'shape': " shape ", }"

static void reads_what_numpy_writes(void)
{
    static const uint64_t s0[1] = {0}, s7[] = {7}, s34[] = {3, 4}, s234[] = {2, 3, 4},
                          sbig[] = {1ull << 40, 3}, s56[] = {5, 6}, s8[] = {8};
    char with_data[256];

    expect_shape(np_f4_0d, LEN(np_f4_0d), 0, s0, 1, 128);
    expect_shape(np_f4_empty, LEN(np_f4_empty), 1, s0, 0, 128);
    expect_shape(np_f4_7, LEN(np_f4_7), 1, s7, 7, 128);
    expect_shape(np_f4_3x4, LEN(np_f4_3x4), 2, s34, 12, 128);
    expect_shape(np_f4_2x3x4, LEN(np_f4_2x3x4), 3, s234, 24, 128);
    expect_shape(np_f4_big, LEN(np_f4_big), 2, sbig, 3ull << 40, 128);
    expect_shape(np_f4_v2, LEN(np_f4_v2), 2, s56, 30, 128);
    expect_shape(np_f4_v3, LEN(np_f4_v3), 1, s8, 8, 128);
    /* The buffer holds the file's first bytes: data after the header is not looked at. */
    memcpy(with_data, np_f4_3x4, LEN(np_f4_3x4));
    memset(with_data + LEN(np_f4_3x4), 0xff, sizeof(with_data) - LEN(np_f4_3x4));
    expect_shape(with_data, sizeof(with_data), 2, s34, 12, 128);
    /* why may be NULL. */
    {
        gr_npy_header h;
        ASSERT_STATUS(gr_npy_parse_header(np_f4_7, LEN(np_f4_7), &h, NULL, 0), GR_OK);
        ASSERT_STATUS(gr_npy_parse_header(np_c8, LEN(np_c8), &h, NULL, 0),
                      GR_ERR_INVALID_ARGUMENT);
        ASSERT_STATUS(gr_npy_parse_header(np_f8, LEN(np_f8), NULL, NULL, 0),
                      GR_ERR_INVALID_ARGUMENT);
    }
}

static void accepts_python_spellings(void)
{
    static const uint64_t s23[] = {2, 3}, s5[] = {5}, s3[] = {3}, sbig[] = {(1ull << 62) - 64};

    /* Keys in any order, double quotes, no spaces or many, no trailing comma. */
    accept_dict(1, "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", 2, s23);
    accept_dict(1, "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3)}", 2, s23);
    accept_dict(1, "  {  'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 5 , ) , }  ",
                1, s5);
    accept_dict(1, F4("(2, 3,)"), 2, s23);
    /* Python 2 wrote 3L; NumPy filters the L from versions 1.0 and 2.0. */
    accept_dict(1, F4("(3L,)"), 1, s3);
    accept_dict(2, F4("(2L, 3L)"), 2, s23);
    /* '=f4' is the host's order, little-endian here (see npy.c). */
    accept_dict(1, "{'descr': '=f4', 'fortran_order': False, 'shape': (5,), }", 1, s5);
    /* The largest element count whose bytes, after the header, a uint64 still counts. */
    accept_dict(1, F4("(4611686018427387840,)"), 1, sbig);
}

static void reads_every_type(void)
{
    static const uint64_t s3[] = {3}, s23[] = {2, 3}, s22[] = {2, 2};

    /* This test's expectations are for a little-endian host, as every one graphrun runs on. */
    ASSERT_TRUE(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
    expect_type(np_f4_7, LEN(np_f4_7), GR_DTYPE_FLOAT32, false);
    expect_type(np_f4_big_endian, LEN(np_f4_big_endian), GR_DTYPE_FLOAT32, true);
    expect_type(np_f2, LEN(np_f2), GR_DTYPE_FLOAT16, false);
    expect_type(np_f2_big_endian, LEN(np_f2_big_endian), GR_DTYPE_FLOAT16, true);
    expect_type(np_f8, LEN(np_f8), GR_DTYPE_FLOAT64, false);
    expect_type(np_f8_big_endian, LEN(np_f8_big_endian), GR_DTYPE_FLOAT64, true);
    expect_type(np_i4, LEN(np_i4), GR_DTYPE_INT32, false);
    expect_type(np_i4_big_endian, LEN(np_i4_big_endian), GR_DTYPE_INT32, true);
    expect_type(np_u1, LEN(np_u1), GR_DTYPE_UINT8, false);
    expect_type(np_bf16, LEN(np_bf16), GR_DTYPE_BFLOAT16, false);
    expect_type(np_bf16_big_endian, LEN(np_bf16_big_endian), GR_DTYPE_BFLOAT16, true);
    expect_type(np_v2_reloaded, LEN(np_v2_reloaded), GR_DTYPE_BFLOAT16, false);
    expect_shape(np_f8_big_endian, LEN(np_f8_big_endian), 2, s23, 6, 128);
    expect_shape(np_bf16, LEN(np_bf16), 2, s22, 4, 128);
    expect_shape(np_u1, LEN(np_u1), 1, s3, 3, 128);
    /* Spellings NumPy does not write but reads: '=' (the host's order), any order of a byte. */
    accept_dict(1, "{'descr': '=f2', 'fortran_order': False, 'shape': (3,), }", 1, s3);
    accept_dict(1, "{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }", 1, s3);
    accept_dict(1, "{'descr': '>u1', 'fortran_order': False, 'shape': (3,), }", 1, s3);
    /* The largest uint8 array a uint64 counts the bytes of: 1 byte each, not 4. */
    {
        static const uint64_t big[] = {UINT64_MAX - 87}; /* after an 87-byte header */
        accept_dict(1, "{'descr': '|u1', 'fortran_order': False, "
                       "'shape': (18446744073709551528,), }", 1, big);
    }
    refuse_dict(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (18446744073709551529,), }",
                ".npy shape has 18446744073709551529 elements: more uint8 bytes than a file "
                "can hold");
    {
        static const uint64_t big[] = {(UINT64_MAX - 86) / 8}; /* after an 86-byte header */
        accept_dict(1, "{'descr': '<f8', 'fortran_order': False, "
                       "'shape': (2305843009213693941,), }", 1, big);
    }
    refuse_dict(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693942,), }",
                ".npy shape has 2305843009213693942 elements: more float64 bytes than a file "
                "can hold");
}

/* A port's type: the same type passes; any other is refused saying how to convert. */
static void checks_the_port_type(void)
{
    static const struct {
        const char *bytes;
        size_t len;
    } files[] = {
        {np_f4_7, LEN(np_f4_7)}, {np_f2, LEN(np_f2)}, {np_bf16, LEN(np_bf16)},
        {np_f8, LEN(np_f8)},     {np_i4, LEN(np_i4)}, {np_u1, LEN(np_u1)},
    };
    static const gr_dtype order[] = {GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT16, GR_DTYPE_BFLOAT16,
                                     GR_DTYPE_FLOAT64, GR_DTYPE_INT32, GR_DTYPE_UINT8};
    gr_npy_header h;
    char why[512];

    for (size_t f = 0; f < 6; f++) {
        ASSERT_STATUS(gr_npy_parse_header(files[f].bytes, files[f].len, &h, NULL, 0), GR_OK);
        ASSERT_EQ(h.dtype, order[f]);
        for (size_t p = 0; p < 6; p++) {
            gr_status st = gr_npy_check_dtype(&h, order[p], "x.npy", "the graph's in0", why,
                                              sizeof(why));

            ASSERT_STATUS(st, f == p ? GR_OK : GR_ERR_INVALID_ARGUMENT);
            ASSERT_TRUE(f == p || strstr(why, "the graph's in0 is ") != NULL);
        }
    }
    ASSERT_STATUS(gr_npy_parse_header(np_f4_7, LEN(np_f4_7), &h, NULL, 0), GR_OK);
    gr_npy_check_dtype(&h, GR_DTYPE_UINT8, "x.npy", "the graph's in0", why, sizeof(why));
    ASSERT_STR_EQ(why, "x.npy holds float32 but the graph's in0 is uint8: convert with "
                       "a.astype(np.uint8) or change the spec's buffer type");
    gr_npy_check_dtype(&h, GR_DTYPE_BFLOAT16, "the body", "pipeline p's input", why,
                       sizeof(why));
    ASSERT_STR_EQ(why, "the body holds float32 but pipeline p's input is bfloat16: convert "
                       "with a.astype(ml_dtypes.bfloat16) or change the spec's buffer type");
    ASSERT_STATUS(gr_npy_parse_header(np_bf16, LEN(np_bf16), &h, NULL, 0), GR_OK);
    gr_npy_check_dtype(&h, GR_DTYPE_FLOAT32, "b.npy", "the graph's in1", why, sizeof(why));
    ASSERT_STR_EQ(why, "b.npy holds 2-byte raw values ('<V2': what np.save writes for "
                       "ml_dtypes.bfloat16, read only as bfloat16) but the graph's in1 is "
                       "float32: convert with a.view(ml_dtypes.bfloat16).astype(np.float32) "
                       "or change the spec's buffer type");
    ASSERT_STATUS(gr_npy_parse_header(np_f8_big_endian, LEN(np_f8_big_endian), &h, NULL, 0),
                  GR_OK);
    gr_npy_check_dtype(&h, GR_DTYPE_FLOAT16, "x.npy", "the graph's in0", why, sizeof(why));
    ASSERT_STR_EQ(why, "x.npy holds float64 but the graph's in0 is float16: convert with "
                       "a.astype(np.float16) or change the spec's buffer type");
}

static void swaps_bytes(void)
{
    unsigned char b[16];

    for (int i = 0; i < 16; i++)
        b[i] = (unsigned char)i;
    gr_npy_swap(b, 2, 8);
    ASSERT_EQ(b[0], 7);
    ASSERT_EQ(b[7], 0);
    ASSERT_EQ(b[8], 15);
    ASSERT_EQ(b[15], 8);
    gr_npy_swap(b, 4, 4);
    ASSERT_EQ(b[0], 4);
    ASSERT_EQ(b[3], 7);
    ASSERT_EQ(b[12], 8);
    gr_npy_swap(b, 8, 2);
    ASSERT_EQ(b[0], 5);
    ASSERT_EQ(b[1], 4);
    gr_npy_swap(b, 16, 1); /* one byte: unchanged */
    ASSERT_EQ(b[0], 5);
    ASSERT_EQ(b[1], 4);
    gr_npy_swap(b, 0, 8);
    ASSERT_EQ(b[0], 5);
}

static void formats_what_numpy_writes(void)
{
    static const struct {
        const char *bytes;
        size_t len;
        gr_dtype dtype;
        uint32_t ndim;
        uint64_t shape[2];
    } cases[] = {
        {np_f4_0d, LEN(np_f4_0d), GR_DTYPE_FLOAT32, 0, {0, 0}},
        {np_f4_empty, LEN(np_f4_empty), GR_DTYPE_FLOAT32, 1, {0, 0}},
        {np_f4_7, LEN(np_f4_7), GR_DTYPE_FLOAT32, 1, {7, 0}},
        {np_f4_3x4, LEN(np_f4_3x4), GR_DTYPE_FLOAT32, 2, {3, 4}},
        {np_f4_big, LEN(np_f4_big), GR_DTYPE_FLOAT32, 2, {1ull << 40, 3}},
        {np_f2, LEN(np_f2), GR_DTYPE_FLOAT16, 1, {3, 0}},
        {np_f8, LEN(np_f8), GR_DTYPE_FLOAT64, 1, {3, 0}},
        {np_i4, LEN(np_i4), GR_DTYPE_INT32, 1, {3, 0}},
        {np_u1, LEN(np_u1), GR_DTYPE_UINT8, 1, {3, 0}},
        {np_bf16, LEN(np_bf16), GR_DTYPE_BFLOAT16, 2, {2, 2}},
    };
    static const uint64_t s234[] = {2, 3, 4};
    char buf[512];
    size_t n;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        n = gr_npy_format_header(cases[i].dtype, cases[i].shape, cases[i].ndim, buf,
                                 sizeof(buf));
        ASSERT_EQ_U64(n, cases[i].len);
        if (memcmp(buf, cases[i].bytes, n) != 0)
            GR_TEST_FAIL("case %zu: header differs from NumPy's:\n  got:  %.*s\n  want: %.*s",
                         i, (int)(n - 10), buf + 10, (int)(n - 10), cases[i].bytes + 10);
    }
    n = gr_npy_format_header(GR_DTYPE_FLOAT32, s234, 3, buf, sizeof(buf));
    ASSERT_EQ_U64(n, LEN(np_f4_2x3x4));
    ASSERT_TRUE(memcmp(buf, np_f4_2x3x4, n) == 0);
    /* Not a type: nothing. */
    ASSERT_EQ_U64(gr_npy_format_header(GR_DTYPE_COUNT_, s234, 3, buf, sizeof(buf)), 0);
}

static void format_refusals(void)
{
    static const uint64_t s34[] = {3, 4};
    uint64_t many[GR_NPY_MAX_DIMS + 1];
    char buf[2048];
    size_t need;

    need = gr_npy_format_header(GR_DTYPE_FLOAT32, s34, 2, buf, sizeof(buf));
    ASSERT_EQ_U64(need, 128);
    /* Too small by any amount: 0, and nothing written. */
    for (size_t size = 0; size < need; size++) {
        memset(buf, '#', sizeof(buf));
        ASSERT_EQ_U64(gr_npy_format_header(GR_DTYPE_FLOAT32, s34, 2, buf, size), 0);
        for (size_t i = 0; i < sizeof(buf); i++)
            ASSERT_EQ(buf[i], '#');
    }
    for (int i = 0; i <= GR_NPY_MAX_DIMS; i++)
        many[i] = UINT64_MAX;
    ASSERT_EQ_U64(
        gr_npy_format_header(GR_DTYPE_FLOAT32, many, GR_NPY_MAX_DIMS + 1, buf, sizeof(buf)), 0);
    ASSERT_EQ_U64(gr_npy_format_header(GR_DTYPE_FLOAT32, NULL, 1, buf, sizeof(buf)), 0);
    /* The widest header there is fits in 1 KiB. */
    need = gr_npy_format_header(GR_DTYPE_UINT8, many, GR_NPY_MAX_DIMS, buf, sizeof(buf));
    ASSERT_GT(need, 0);
    ASSERT_LE_U64(need, 1024);
    ASSERT_EQ_U64(need % 64, 0);
}

/* Random shapes, 0 to GR_NPY_MAX_DIMS dimensions, of every type, formatted and parsed back:
 * the same shape and type in the host's order, or a refusal exactly when the data's size
 * would overflow 64 bits. */
static void round_trips_many_shapes(void)
{
    static const uint64_t picks[] = {0, 1, 2, 3, 7, 10, 255, 65536, 1000003, UINT32_MAX,
                                     1ull << 32, 1ull << 62, UINT64_MAX};
    uint64_t seed = 1, shape[GR_NPY_MAX_DIMS];
    char buf[1024], why[256];
    gr_npy_header h;
    unsigned accepted = 0, refused = 0;

    for (int iter = 0; iter < 20000; iter++) {
        uint32_t ndim = (uint32_t)gr_test_below(&seed, GR_NPY_MAX_DIMS + 1);
        gr_dtype dtype = (gr_dtype)gr_test_below(&seed, GR_DTYPE_COUNT_);
        unsigned size = dtype == GR_DTYPE_UINT8                                     ? 1
                        : dtype == GR_DTYPE_FLOAT16 || dtype == GR_DTYPE_BFLOAT16 ? 2
                        : dtype == GR_DTYPE_FLOAT64                                 ? 8
                                                                                    : 4;
        unsigned __int128 elems = 1;
        bool zero = false, overflow = false;
        size_t n;

        if (iter % 3 == 0)
            ndim = ndim % 5;
        for (uint32_t i = 0; i < ndim; i++) {
            uint64_t r = gr_test_rand(&seed);
            shape[i] = iter % 2 ? picks[r % (sizeof(picks) / sizeof(picks[0]))]
                                : 1 + r % (iter % 7 == 0 ? UINT64_MAX : 9);
            zero |= shape[i] == 0;
        }
        for (uint32_t i = 0; i < ndim && !zero && !overflow; i++) {
            elems *= shape[i];
            overflow = elems > UINT64_MAX;
        }
        n = gr_npy_format_header(dtype, shape, ndim, buf, sizeof(buf));
        ASSERT_GT(n, 0);
        ASSERT_EQ_U64(n % 64, 0);
        ASSERT_EQ(buf[n - 1], '\n');
        if (zero)
            elems = 0;
        overflow = overflow || elems * size + n > UINT64_MAX;
        if (overflow) {
            ASSERT_STATUS(gr_npy_parse_header(buf, n, &h, why, sizeof(why)),
                          GR_ERR_INVALID_ARGUMENT);
            ASSERT_STR_CONTAINS(why, ".npy shape has ");
            refused++;
            continue;
        }
        if (gr_npy_parse_header(buf, n, &h, why, sizeof(why)) != GR_OK)
            GR_TEST_FAIL("round trip refused: %s", why);
        ASSERT_EQ(h.ndim, ndim);
        for (uint32_t i = 0; i < ndim; i++)
            ASSERT_EQ_U64(h.shape[i], shape[i]);
        ASSERT_EQ_U64(h.elems, (uint64_t)elems);
        ASSERT_EQ_U64(h.data_offset, n);
        ASSERT_EQ(h.dtype, dtype);
        ASSERT_TRUE(!h.swap);
        accepted++;
    }
    ASSERT_GT(accepted, 1000);
    ASSERT_GT(refused, 1000);
}

static void refuses_what_is_not_npy(void)
{
    char buf[256];

    refuse("PK\x03\x04 a zip file", 16,
           "not a .npy file: it does not start with \"\\x93NUMPY\" (save it with np.save)");
    refuse("\x93NUMPZ", 6,
           "not a .npy file: it does not start with \"\\x93NUMPY\" (save it with np.save)");
    refuse("\x93", 1, "truncated .npy file: 1 bytes, too short for a header");
    refuse("", 0, "truncated .npy file: 0 bytes, too short for a header");
    refuse(NULL, 0, "truncated .npy file: 0 bytes, too short for a header");
    memcpy(buf, np_f4_7, LEN(np_f4_7));
    buf[6] = 4;
    refuse(buf, LEN(np_f4_7), ".npy format version 4.0 is not supported: graphrun reads 1.0, "
                              "2.0 and 3.0 (np.save writes 1.0)");
    buf[6] = 1;
    buf[7] = 1;
    refuse(buf, LEN(np_f4_7), ".npy format version 1.1 is not supported: graphrun reads 1.0, "
                              "2.0 and 3.0 (np.save writes 1.0)");
    buf[6] = 0;
    buf[7] = 0;
    refuse(buf, LEN(np_f4_7), ".npy format version 0.0 is not supported: graphrun reads 1.0, "
                              "2.0 and 3.0 (np.save writes 1.0)");
    /* A header length past the bytes given. */
    memcpy(buf, np_f4_7, LEN(np_f4_7));
    buf[9] = 1; /* 0x176 = 374 bytes */
    refuse(buf, LEN(np_f4_7), "truncated .npy header: it says 374 bytes follow the 10-byte "
                              "preamble, but only 118 bytes were given");
    memcpy(buf, np_f4_v2, LEN(np_f4_v2));
    buf[11] = (char)0xff;
    refuse(buf, LEN(np_f4_v2), "truncated .npy header: it says 4278190196 bytes follow the "
                               "12-byte preamble, but only 116 bytes were given");
    /* A header length of 0: no dict at all. */
    refuse("\x93NUMPY\x01\x00\x00\x00", 10,
           "malformed .npy header at byte 10: expected '{' (a .npy header is a Python dict), "
           "found the end of the header (is this file from np.save?)");
}

/* Every prefix of a valid header is refused, with a message, and nothing past it is read
 * (ASan builds check the reads: each prefix is copied into a buffer of exactly its size). */
static void refuses_every_truncation(void)
{
    const struct {
        const char *bytes;
        size_t len;
    } headers[] = {
        {np_f4_3x4, LEN(np_f4_3x4)},
        {np_f4_v2, LEN(np_f4_v2)},
        {np_f4_v3, LEN(np_f4_v3)},
        {np_f4_0d, LEN(np_f4_0d)},
    };
    char why[256];
    gr_npy_header h;

    for (size_t k = 0; k < sizeof(headers) / sizeof(headers[0]); k++) {
        for (size_t len = 0; len < headers[k].len; len++) {
            char *copy = malloc(len ? len : 1);

            ASSERT_TRUE(copy != NULL);
            memcpy(copy, headers[k].bytes, len);
            why[0] = '\0';
            ASSERT_STATUS(gr_npy_parse_header(copy, len, &h, why, sizeof(why)),
                          GR_ERR_INVALID_ARGUMENT);
            ASSERT_STR_CONTAINS(why, "truncated .npy");
            free(copy);
        }
    }
}

static void refuses_other_dtypes(void)
{
    refuse(np_c8, LEN(np_c8),
           "dtype '<c8' (complex64) is not supported: graphrun reads float32, float16, "
           "bfloat16, float64, int32 and uint8; convert with a.astype(...) to the type the "
           "graph takes, e.g. a.astype(np.float32)");
    refuse(np_i8, LEN(np_i8),
           "dtype '<i8' (int64) is not supported: graphrun reads float32, float16, bfloat16, "
           "float64, int32 and uint8; convert with a.astype(...) to the type the graph takes, "
           "e.g. a.astype(np.float32)");
    refuse(np_b1, LEN(np_b1),
           "dtype '|b1' (bool) is not supported: graphrun reads float32, float16, bfloat16, "
           "float64, int32 and uint8; convert with a.astype(...) to the type the graph takes, "
           "e.g. a.astype(np.float32)");
    /* uint16 is a number, not bfloat16's bit patterns (npy.h). */
    refuse(np_u2, LEN(np_u2),
           "dtype '<u2' (uint16) is not supported: graphrun reads float32, float16, bfloat16, "
           "float64, int32 and uint8; convert with a.astype(...) to the type the graph takes "
           "(bfloat16 bit patterns held as uint16: save a.view(ml_dtypes.bfloat16))");
    refuse_dict(1, "{'descr': '|f4', 'fortran_order': False, 'shape': (3,), }",
                "dtype '|f4' (float32 of unknown byte order) is not supported: NumPy writes "
                "'<f4' or '>f4'; convert with a.astype('<f4')");
    refuse_dict(1, "{'descr': '|f2', 'fortran_order': False, 'shape': (3,), }",
                "dtype '|f2' (float16 of unknown byte order) is not supported: NumPy writes "
                "'<f2' or '>f2'; convert with a.astype('<f2')");
    refuse_dict(1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
                "dtype '|O' (Python objects) is not supported: graphrun reads float32, float16, "
                "bfloat16, float64, int32 and uint8; convert with a.astype(...) to the type the "
                "graph takes, e.g. a.astype(np.float32)");
    refuse_dict(1, "{'descr': '<V4', 'fortran_order': False, 'shape': (3,), }",
                "dtype '<V4' (raw bytes) is not supported: graphrun reads float32, float16, "
                "bfloat16, float64, int32 and uint8; convert with a.astype(...) to the type the "
                "graph takes, e.g. a.astype(np.float32)");
    refuse_dict(1, "{'descr': 'float32', 'fortran_order': False, 'shape': (3,), }",
                "dtype 'float32' (not a dtype NumPy writes) is not supported: graphrun reads "
                "float32, float16, bfloat16, float64, int32 and uint8; convert with "
                "a.astype(...) to the type the graph takes, e.g. a.astype(np.float32)");
    /* Near misses of accepted spellings. */
    refuse_dict(1, "{'descr': '<f04', 'fortran_order': False, 'shape': (3,), }",
                "dtype '<f04' (float32) is not supported: graphrun reads float32, float16, "
                "bfloat16, float64, int32 and uint8; convert with a.astype(...) to the type "
                "the graph takes, e.g. a.astype(np.float32)");
    refuse_dict(1, "{'descr': '<f4 ', 'fortran_order': False, 'shape': (3,), }",
                "dtype '<f4 ' (not a dtype NumPy writes) is not supported: graphrun reads "
                "float32, float16, bfloat16, float64, int32 and uint8; convert with "
                "a.astype(...) to the type the graph takes, e.g. a.astype(np.float32)");
    refuse(np_structured, LEN(np_structured),
           "structured dtype (a list of fields) is not supported: graphrun reads arrays of one "
           "plain type; save each field on its own, e.g. np.save(path, a['x'])");
    refuse(np_fortran, LEN(np_fortran),
           "Fortran-ordered array (fortran_order: True) is not supported: graphrun reads C "
           "order; save np.ascontiguousarray(a)");
}

static void refuses_malformed_dicts(void)
{
    refuse_dict(1, "{'descr': '<f4', 'fortran_order': False}",
                "malformed .npy header: no 'shape' key");
    refuse_dict(1, "{'fortran_order': False, 'shape': (3,)}",
                "malformed .npy header: no 'descr' key");
    refuse_dict(1, "{'descr': '<f4', 'shape': (3,)}",
                "malformed .npy header: no 'fortran_order' key");
    refuse_dict(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
                "malformed .npy header: key 'descr' appears twice");
    refuse_dict(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'dtype': 1}",
                "malformed .npy header: unknown key 'dtype' (a .npy header has 'descr', "
                "'fortran_order' and 'shape')");
    refuse_dict(1, "hello",
                "malformed .npy header at byte 10: expected '{' (a .npy header is a Python "
                "dict), found 'hello' (is this file from np.save?)");
    refuse_dict(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}",
                "malformed .npy header at byte 26: expected ',' or '}' after a value, found "
                "''fortran_order'' (is this file from np.save?)");
    refuse_dict(1, "{'descr' '<f4'}",
                "malformed .npy header at byte 19: expected ':' after the key, found ''<f4''"
                " (is this file from np.save?)");
    refuse_dict(1, "{'descr': <f4, 'fortran_order': False, 'shape': (3,)}",
                "malformed .npy header at byte 20: expected a dtype string such as '<f4' for "
                "'descr', found '<f4' (is this file from np.save?)");
    refuse_dict(1, "{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}",
                "malformed .npy header at byte 27: expected ',' or '}' after a value, found "
                "'fortran_order'' (is this file from np.save?)");
    refuse_dict(1, "{'descr': '<f4\\n', 'fortran_order': False, 'shape': (3,)}",
                "malformed .npy header at byte 24: expected a plain string, found '\\n'' (is "
                "this file from np.save?)");
    refuse_dict(1, "{'descr': '<f4", "malformed .npy header at byte 24: expected a plain "
                                     "string, found byte 0x0a (is this file from np.save?)");
    refuse("\x93NUMPY\x01\x00\x0e\x00{'descr': '<f4", 24,
           "malformed .npy header at byte 24: expected the end of a string, found the end of "
           "the header (is this file from np.save?)");
    refuse_dict(1, "{'descr': '<f4', 'fortran_order': Trueish, 'shape': (3,)}",
                "malformed .npy header at byte 44: expected True or False for 'fortran_order', "
                "found 'Trueish' (is this file from np.save?)");
    refuse_dict(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}",
                "malformed .npy header at byte 44: expected True or False for 'fortran_order', "
                "found '0' (is this file from np.save?)");
    refuse_dict(1, F4("(3,)") " junk",
                "malformed .npy header at byte 68: expected only spaces and a newline after "
                "the dict, found 'junk' (is this file from np.save?)");
    {
        char buf[128];
        size_t len = make_header(1, F4("(3,)"), buf, sizeof(buf));

        buf[len - 1] = '\0'; /* a NUL where the newline was */
        refuse(buf, len, "malformed .npy header at byte 67: expected only spaces and a newline "
                         "after the dict, found byte 0x00 (is this file from np.save?)");
    }
    refuse_dict(1, "{'descr': 'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz'}",
                "malformed .npy header at byte 20: a string of 52 characters where a dtype "
                "string such as '<f4' for 'descr' was expected");
}

static void refuses_bad_shapes(void)
{
    refuse_dict(1, F4("(-1,)"), "malformed .npy header: shape has a negative dimension '-1'");
    refuse_dict(1, F4("(2.0, 3)"),
                "malformed .npy header at byte 61: expected a shape of non-negative integers, "
                "found '2.0' (is this file from np.save?)");
    refuse_dict(1, F4("(2, x)"),
                "malformed .npy header at byte 64: expected a shape of non-negative integers, "
                "found 'x' (is this file from np.save?)");
    refuse_dict(1, F4("(True,)"),
                "malformed .npy header at byte 61: expected a shape of non-negative integers, "
                "found 'True' (is this file from np.save?)");
    refuse_dict(1, F4("(07,)"),
                "malformed .npy header at byte 61: expected a shape of non-negative integers, "
                "found '07' (is this file from np.save?)");
    refuse_dict(1, F4("(2 3)"),
                "malformed .npy header at byte 63: expected ',' or ')' in the shape, found '3'"
                " (is this file from np.save?)");
    refuse_dict(1, F4("(,)"),
                "malformed .npy header at byte 61: expected a shape of non-negative integers, "
                "found ',' (is this file from np.save?)");
    refuse_dict(1, F4("[3]"),
                "malformed .npy header at byte 60: expected a shape tuple such as (2, 3) for "
                "'shape', found '[3' (is this file from np.save?)");
    refuse_dict(1, F4("(5)"), "malformed .npy header: shape (5) is an integer, not a tuple (a "
                              "1-d shape is written (5,))");
    refuse_dict(3, F4("(3L,)"),
                "malformed .npy header at byte 63: expected a shape of non-negative integers, "
                "found '3L' (is this file from np.save?)");
    refuse_dict(1, F4("(18446744073709551616,)"),
                "malformed .npy header: shape dimension '18446744073709551616' does not fit in "
                "64 bits");
    refuse_dict(1, F4("(4294967296, 4294967296)"),
                ".npy shape has more elements than 64 bits can count (dimension 1 is "
                "4294967296)");
    refuse_dict(1, F4("(4611686018427387904,)"),
                ".npy shape has 4611686018427387904 elements: more float32 bytes than a file "
                "can hold");
    refuse_dict(1, F4("(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)"),
                ".npy array has more than 32 dimensions: graphrun reads at most 32");
}

GR_TEST_MAIN(GR_TEST(reads_what_numpy_writes), GR_TEST(accepts_python_spellings),
             GR_TEST(reads_every_type), GR_TEST(checks_the_port_type), GR_TEST(swaps_bytes),
             GR_TEST(formats_what_numpy_writes), GR_TEST(format_refusals),
             GR_TEST(round_trips_many_shapes), GR_TEST(refuses_what_is_not_npy),
             GR_TEST(refuses_every_truncation), GR_TEST(refuses_other_dtypes),
             GR_TEST(refuses_malformed_dicts), GR_TEST(refuses_bad_shapes))
