/*
 * base_test.c - status texts, backend names, deadline arithmetic and the error-detail
 * helpers every module uses.
 */
#include "runtime/base/sync.h"
#include "tests/testing.h"

static void status_texts(void)
{
    for (int i = 0; i < GR_STATUS_COUNT_; i++) {
        const char *s = gr_status_str((gr_status)i);
        ASSERT_TRUE(s != NULL && s[0] != '\0');
        ASSERT_TRUE(strcmp(s, "unknown status") != 0);
        for (int j = 0; j < i; j++)
            ASSERT_TRUE(strcmp(s, gr_status_str((gr_status)j)) != 0);
    }
    ASSERT_STR_EQ(gr_status_str(GR_STATUS_COUNT_), "unknown status");
    ASSERT_STR_EQ(gr_status_str((gr_status)-1), "unknown status");
    ASSERT_STR_EQ(gr_backend_name(GR_BACKEND_HOST), "host");
    ASSERT_STR_EQ(gr_backend_name(GR_BACKEND_CUDA), "cuda");
    ASSERT_STR_EQ(gr_backend_name((gr_backend)9), "unknown");
}

static void deadlines(void)
{
    int64_t now = gr_now_ns(), d;

    ASSERT_GT(now, 0);
    ASSERT_EQ(gr__deadline_after(GR_WAIT_FOREVER), GR_NO_DEADLINE);
    d = gr__deadline_after(1000000);
    ASSERT_GE(d, now + 1000000);
    ASSERT_EQ(gr__deadline_after(INT64_MAX), INT64_MAX); /* saturates */
    ASSERT_EQ(gr__deadline_min(GR_NO_DEADLINE, 5), 5);
    ASSERT_EQ(gr__deadline_min(7, GR_NO_DEADLINE), 7);
    ASSERT_EQ(gr__deadline_min(7, 5), 5);
    ASSERT_TRUE(!gr_deadline_passed(GR_NO_DEADLINE, now));
    ASSERT_TRUE(gr_deadline_passed(now, now));
    ASSERT_TRUE(!gr_deadline_passed(now + 1, now));
}

static void timed_wait_honours_deadline(void)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    int64_t start = gr_now_ns();
    bool timed_out = false;

    ASSERT_EQ(gr__cond_init(&cv), 0);
    pthread_mutex_lock(&mu);
    while (!timed_out)
        timed_out = gr__cond_wait_until(&cv, &mu, start + 20 * 1000000);
    pthread_mutex_unlock(&mu);
    ASSERT_GE(gr_now_ns() - start, 20 * 1000000);
    /* A deadline already past returns at once. */
    pthread_mutex_lock(&mu);
    ASSERT_TRUE(gr__cond_wait_until(&cv, &mu, start));
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cv);
}

static void strings_and_error_detail(void)
{
    char buf[4];
    gr_error_info e;

    gr__strlcpy(buf, "abcdef", sizeof(buf));
    ASSERT_STR_EQ(buf, "abc");
    gr__strlcpy(buf, NULL, sizeof(buf));
    ASSERT_TRUE(buf[0] == '\0');
    ASSERT_STATUS(gr__error_set(&e, GR_ERR_CUDA, 17, "kernel_node", "code %d", 700), GR_ERR_CUDA);
    ASSERT_STATUS(e.status, GR_ERR_CUDA);
    ASSERT_EQ_U64(e.index, 17);
    ASSERT_STR_EQ(e.node, "kernel_node");
    ASSERT_STR_EQ(e.message, "code 700");
    ASSERT_STATUS(gr__error_set(NULL, GR_ERR_TIMEOUT, 0, NULL, "x"), GR_ERR_TIMEOUT);
}

GR_TEST_MAIN(GR_TEST(status_texts), GR_TEST(deadlines), GR_TEST(timed_wait_honours_deadline),
             GR_TEST(strings_and_error_detail))
