/*
 * cli_test.c - the driver's one rule for sizes (tools/graphrun/cli.h: gr_cli_parse_size):
 * every accepted form with its value, and the forms refused (what strtod would have taken,
 * fractions of a byte, overflow).
 */
#include <stdint.h>

#include "tests/testing.h"
#include "tools/graphrun/cli.h"

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

GR_TEST_MAIN(GR_TEST(sizes_accepted), GR_TEST(sizes_refused))
