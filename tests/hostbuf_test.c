/*
 * hostbuf_test.c - tools/graphrun/hostbuf.c's large buffers (gr_hostbuf_alloc_large):
 * where the kernel gives transparent huge pages on request, a pinned buffer's data starts
 * on a 2 MiB boundary, in a mapping of its own that holds the request to the page (what
 * the window counts is what is pinned), with one page for the header before it; every
 * byte is usable, and freeing unmaps it. GR_TEST_HUGE_PAGES=0 and =refuse take the
 * ordinary way, as other kinds always do. Where the kernel gives no huge pages on request
 * the huge-page case is skipped, saying so.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testing.h"
#include "tools/graphrun/hostbuf.h"

#define HUGE_PAGE (2u << 20)
#define PAGE 4096u

/* Read here, not asked of hostbuf.c: the test's own view of what the kernel offers. */
static bool thp_on_request(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    size_t n = f != NULL ? fread(mode, 1, sizeof(mode) - 1, f) : 0;

    if (f != NULL)
        fclose(f);
    mode[n] = '\0';
    return strstr(mode, "[madvise]") != NULL || strstr(mode, "[always]") != NULL;
}

/* The extent of the mapping (/proc/self/maps) that holds address a; false if none. */
static bool mapping_of(uintptr_t a, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;

    ASSERT_TRUE(f != NULL);
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        unsigned long s, e;

        if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s <= a && a < e) {
            *lo = s;
            *hi = e;
            found = true;
        }
    }
    fclose(f);
    return found;
}

static void fill_and_check(unsigned char *p, uint64_t bytes)
{
    for (uint64_t i = 0; i < bytes; i++)
        p[i] = (unsigned char)(i * 131 + 7);
    for (uint64_t i = 0; i < bytes; i++)
        if (p[i] != (unsigned char)(i * 131 + 7))
            GR_TEST_FAIL("byte %llu reads back wrong", (unsigned long long)i);
}

static void pinned_buffer_on_huge_pages(void)
{
    const uint64_t bytes = 5 * HUGE_PAGE + 100; /* not a whole number of pages */
    const uint64_t need = (bytes + PAGE - 1) / PAGE * PAGE;
    uintptr_t lo, hi;
    unsigned char *p;

    if (!thp_on_request())
        SKIP("transparent huge pages are not given on request here (the ordinary way is "
             "the other cases')");
    unsetenv("GR_TEST_HUGE_PAGES");
    p = gr_hostbuf_alloc_large(GR_MEM_PINNED, bytes);
    ASSERT_TRUE(p != NULL);
    ASSERT_TRUE(gr_hostbuf_huge(p));
    ASSERT_TRUE(gr_hostbuf_kind(p) == GR_MEM_PINNED);
    ASSERT_TRUE((uintptr_t)p % HUGE_PAGE == 0);
    /* The data is a mapping of its own (MADV_HUGEPAGE sets it apart from its neighbours),
     * of the request to the page, after the header's page. */
    ASSERT_TRUE(mapping_of((uintptr_t)p, &lo, &hi));
    ASSERT_TRUE(lo == (uintptr_t)p);
    ASSERT_TRUE(hi == (uintptr_t)p + need);
    ASSERT_TRUE(mapping_of((uintptr_t)p - 1, &lo, &hi));
    ASSERT_TRUE(lo <= (uintptr_t)p - PAGE);
    fill_and_check(p, bytes);
    gr_hostbuf_free(p);
    ASSERT_TRUE(!mapping_of((uintptr_t)p, &lo, &hi));
}

static void ordinary_way_when_asked_or_refused(void)
{
    const char *modes[] = {"0", "refuse"};

    for (int m = 0; m < 2; m++) {
        unsigned char *p;

        ASSERT_TRUE(setenv("GR_TEST_HUGE_PAGES", modes[m], 1) == 0);
        p = gr_hostbuf_alloc_large(GR_MEM_PINNED, 3 * HUGE_PAGE);
        ASSERT_TRUE(p != NULL);
        ASSERT_TRUE(!gr_hostbuf_huge(p));
        fill_and_check(p, 3 * HUGE_PAGE);
        gr_hostbuf_free(p);
    }
    unsetenv("GR_TEST_HUGE_PAGES");
}

static void other_kinds_take_the_ordinary_way(void)
{
    gr_mem_kind kinds[] = {GR_MEM_PAGEABLE, GR_MEM_REGISTERED};

    unsetenv("GR_TEST_HUGE_PAGES");
    for (int k = 0; k < 2; k++) {
        unsigned char *p = gr_hostbuf_alloc_large(kinds[k], 3 * HUGE_PAGE);

        ASSERT_TRUE(p != NULL);
        ASSERT_TRUE(!gr_hostbuf_huge(p));
        fill_and_check(p, 3 * HUGE_PAGE);
        gr_hostbuf_free(p);
    }
}

GR_TEST_MAIN(GR_TEST(pinned_buffer_on_huge_pages), GR_TEST(ordinary_way_when_asked_or_refused),
             GR_TEST(other_kinds_take_the_ordinary_way))
