/*
 * cli_test.c - the driver's one rule for sizes (tools/graphrun/cli.h: gr_cli_parse_size):
 * every accepted form with its value, and the forms refused (what strtod would have taken,
 * fractions of a byte, overflow); a flag given twice (gr_cli_once); and how --input and
 * --output arguments become paths (tools/graphrun/inputs.h): lists (blanks, comments, paths
 * relative to the list), directories (only .npy files, the rest skipped; sets that differ).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/testing.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/inputs.h"

static void sizes_accepted(void)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } ok[] = {
        {"0", 0},
        {"512", 512},
        {"512B", 512},
        {"512b", 512},
        {"4K", 4096},
        {"4k", 4096},
        {"4Ki", 4096},
        {"4KiB", 4096},
        {"4kib", 4096},
        {"4KB", 4000},
        {"1.5K", 1536},
        {"1.5GiB", 1610612736},
        {"2G", 2147483648ull},
        {"2GB", 2000000000ull},
        {"3MiB", 3145728},
        {"3MB", 3000000},
        {"1T", 1ull << 40},
        {"1TB", 1000000000000ull},
        {"0.5", 0}, /* refused below: not a whole byte */
    };
    for (size_t i = 0; i + 1 < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 12345;

        if (!gr_cli_parse_size(ok[i].text, &v))
            GR_TEST_FAIL("'%s' refused", ok[i].text);
        if (v != ok[i].bytes)
            GR_TEST_FAIL("'%s' is %llu, want %llu", ok[i].text, (unsigned long long)v,
                         (unsigned long long)ok[i].bytes);
    }
}

static void sizes_refused(void)
{
    static const char *const bad[] = {
        "",      "-5",   "+5",    " 5",      "5 ",     "0x10",  "1e3",   "inf",
        "nan",   "1.",   ".5",    "0.5",     "0.3K",   "1.0001K", "1KK",  "1Kib2",
        "1PiB",  "K",    "5kbit", "1.5B",    "18446744073709551616",   "16777216T",
        "1.00000000000001G",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 7;

        if (gr_cli_parse_size(bad[i], &v))
            GR_TEST_FAIL("'%s' accepted as %llu", bad[i], (unsigned long long)v);
        ASSERT_EQ_U64(v, 7); /* untouched */
    }
    ASSERT_TRUE(!gr_cli_parse_size(NULL, &(uint64_t){0}));
}

static void flag_given_twice(void)
{
    static const struct option longopts[] = {
        {"graph", required_argument, NULL, 'g'},
        {"input", required_argument, NULL, 'i'},
        {NULL, 0, NULL, 0},
    };
    uint32_t seen = 0;

    ASSERT_TRUE(gr_cli_once(&seen, 'g', "g", "graphrun test", longopts));
    ASSERT_TRUE(gr_cli_once(&seen, 'i', "g", "graphrun test", longopts)); /* repeatable */
    ASSERT_TRUE(gr_cli_once(&seen, 'i', "g", "graphrun test", longopts));
    ASSERT_TRUE(!gr_cli_once(&seen, 'g', "g", "graphrun test", longopts));
    ASSERT_TRUE(gr_cli_once(&seen, '?', "g", "graphrun test", longopts));
}

static char dir[4096];

static void put(const char *name, const char *text)
{
    char path[8192];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ASSERT_TRUE((f = fopen(path, "w")) != NULL);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char path[8192];

    snprintf(dir, sizeof(dir), "%s/cli_inputs", tmp ? tmp : "/tmp");
    mkdir(dir, 0777);
    snprintf(path, sizeof(path), "%s/a", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof(path), "%s/b", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof(path), "%s/a/sub", dir);
    mkdir(path, 0777);
    put("a/x.npy", "");
    put("a/y.npy", "");
    put("a/notes.txt", "");
    put("a/.hidden.npy", "");
    put("b/x.npy", "");
}

static void lists(void)
{
    char arg[8192], out[8192], want[8192];
    const char *ins[1] = {arg}, *outs[1] = {out};
    gr_inputs_options o = {ins, 1, outs, 1, false, false};
    gr_inputs in;
    char why[512];

    setup();
    put("l.txt", "# a comment\n\n  a/x.npy \r\n\t\n/abs/z.npy\n   # indented comment\n");
    snprintf(arg, sizeof(arg), "@%s/l.txt", dir);
    snprintf(out, sizeof(out), "%s/outdir", dir);
    ASSERT_EQ(gr_inputs_resolve(&o, &in, why, sizeof(why)), GR_OK);
    ASSERT_EQ(in.kind, GR_INPUTS_LISTS);
    ASSERT_TRUE(in.out_dirs);
    ASSERT_EQ_U64(in.total, 2);
    snprintf(want, sizeof(want), "%s/a/x.npy", dir); /* relative to the list's directory */
    ASSERT_TRUE(strcmp(in.in[0], want) == 0);
    ASSERT_TRUE(strcmp(in.in[1], "/abs/z.npy") == 0);
    snprintf(want, sizeof(want), "%s/outdir/z.npy", dir);
    ASSERT_TRUE(strcmp(in.out[1], want) == 0);
    gr_inputs_free(&in);
    snprintf(out, sizeof(out), "%s/o.npy", dir); /* lists out to a file name: refused */
    ASSERT_EQ(gr_inputs_resolve(&o, &in, why, sizeof(why)), GR_ERR_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(why, "named like a file") != NULL);
    put("l2.txt", "#\n\n");
    snprintf(arg, sizeof(arg), "@%s/l2.txt", dir);
    ASSERT_EQ(gr_inputs_resolve(&o, &in, why, sizeof(why)), GR_ERR_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(why, "holds no paths") != NULL);
}

static void directories(void)
{
    char a[8192], b[8192], o0[8192], o1[8192];
    char want[sizeof(a) + sizeof(b) + 64]; /* names both a and b */
    const char *ins[2] = {a, b}, *outs[2] = {o0, o1};
    gr_inputs_options o = {ins, 1, outs, 1, false, false};
    gr_inputs in;
    char why[512];

    setup();
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    snprintf(o0, sizeof(o0), "%s/o0", dir);
    snprintf(o1, sizeof(o1), "%s/o1", dir);
    ASSERT_EQ(gr_inputs_resolve(&o, &in, why, sizeof(why)), GR_OK);
    ASSERT_EQ_U64(in.total, 2); /* x.npy, y.npy: not notes.txt, sub/ or the hidden one */
    ASSERT_TRUE(strcmp(in.names[0], "x.npy") == 0 && strcmp(in.names[1], "y.npy") == 0);
    ASSERT_EQ_U64(in.n_skipped, 2);
    snprintf(want, sizeof(want), "%s/a/notes.txt", dir);
    ASSERT_TRUE(strcmp(in.skipped[0], want) == 0);
    snprintf(want, sizeof(want), "%s/a/sub/", dir);
    ASSERT_TRUE(strcmp(in.skipped[1], want) == 0);
    gr_inputs_free(&in);
    o.raw = true; /* every regular file a tensor; sub/ still skipped */
    ASSERT_EQ(gr_inputs_resolve(&o, &in, why, sizeof(why)), GR_OK);
    ASSERT_EQ_U64(in.total, 3);
    ASSERT_EQ_U64(in.n_skipped, 1);
    gr_inputs_free(&in);
    o.raw = false;
    o.n_inputs = o.n_outputs = 2;
    ASSERT_EQ(gr_inputs_resolve(&o, &in, why, sizeof(why)), GR_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof(want), "input directory %s lacks y.npy, which %s has", b, a);
    if (strstr(why, want) == NULL)
        GR_TEST_FAIL("got '%s', want '%s'", why, want);
    gr_inputs_free(&in); /* freed already: a no-op */
}

GR_TEST_MAIN(GR_TEST(sizes_accepted), GR_TEST(sizes_refused), GR_TEST(flag_given_twice),
             GR_TEST(lists), GR_TEST(directories))
