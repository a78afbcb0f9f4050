/*
 * harness_cases.c - cases that pass, fail, crash, skip, exit, hang and use signals, for
 * tests/harness_test.sh, which runs this binary and checks every line the runner
 * (tests/testing.c) prints, its summary and its exit status. Not a test by itself: most of
 * these cases fail on purpose.
 *
 * The time limit is 2 s unless --timeout or GR_TEST_TIMEOUT says otherwise (the per-binary
 * default). `hangs` writes the pid of the process it forked to $GR_HARNESS_PIDFILE, so the
 * script can check that the runner killed it too.
 */
#define GR_TEST_TIMEOUT_S 2
#include "tests/testing.h"

#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>

static int state; /* set by sets_state; no other case may see it set */
static volatile sig_atomic_t rang;

static void passes(void)
{
    printf("    output of passes\n");
    ASSERT_EQ(1 + 1, 2);
}

static void fails_an_assertion(void)
{
    int two = 2;

    ASSERT_EQ(two + 1, 4);
}

static void fails_float_bits(void)
{
    volatile float zero = 0.0f;

    ASSERT_FLOAT_BITS_EQ(zero, -zero);
}

static void assertions_that_hold(void)
{
    volatile float nan = __builtin_nanf("");
    const char *s = "abc";

    ASSERT_FLOAT_BITS_EQ(nan, nan);
    ASSERT_FLOAT_BITS_EQ(1.5f, 3.0f / 2.0f);
    ASSERT_DOUBLE_NEAR(1.0, 1.0 + 1e-12, 1e-9);
    ASSERT_STR_EQ(s, "abc");
    ASSERT_NE_U64(UINT64_MAX, 0);
    ASSERT_LT_U64(1, UINT64_MAX);
    ASSERT_GE_U64(UINT64_MAX, UINT64_MAX);
    ASSERT_GT_U64(UINT64_MAX, 1);
}

static void fails_double_near(void)
{
    ASSERT_DOUBLE_NEAR(1.0, 1.5, 0.25);
}

static void fails_str_eq(void)
{
    const char *s = "abc";

    ASSERT_STR_EQ(s, "abd");
}

/* A message of several lines: the runner indents all but the first. */
static void fails_with_lines(void)
{
    const char *log = "first\nPASS not a case\n";

    ASSERT_STR_CONTAINS(log, "third");
}

static void crashes(void)
{
    printf("    output of crashes\n");
    signal(SIGSEGV, SIG_DFL); /* a plain crash, whatever handler a sanitizer installed */
    raise(SIGSEGV);
}

static void skips(void)
{
    SKIP("nothing to do here");
}

static void exits(void)
{
    exit(3);
}

static void exit_7(void)
{
    _exit(7);
}

/* Passes, then its process exits with status 7, as one does after a sanitizer's report. */
static void fails_after_passing(void)
{
    atexit(exit_7);
}

static void hangs(void)
{
    const char *pidfile = getenv("GR_HARNESS_PIDFILE");
    pid_t pid = fork();

    ASSERT_TRUE(pid >= 0);
    if (pid == 0)
        for (;;)
            pause();
    if (pidfile != NULL) {
        FILE *f = fopen(pidfile, "w");

        ASSERT_TRUE(f != NULL);
        fprintf(f, "%d\n", (int)pid);
        ASSERT_EQ(fclose(f), 0);
    }
    for (;;)
        pause();
}

/* SIGALRM in 20 ms to `handler`, waited for without a race (the signal is blocked until
 * sigsuspend). */
static void alarm_in_20_ms(void (*handler)(int))
{
    struct itimerval it = {{0, 0}, {0, 20000}};
    struct sigaction sa;
    sigset_t block, old;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    ASSERT_EQ(sigaction(SIGALRM, &sa, NULL), 0);
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    ASSERT_EQ(sigprocmask(SIG_BLOCK, &block, &old), 0);
    ASSERT_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
    while (!rang)
        sigsuspend(&old);
    ASSERT_EQ(sigprocmask(SIG_SETMASK, &old, NULL), 0);
}

static void on_alarm(int sig)
{
    (void)sig;
    rang = 1;
}

static void on_alarm_fail(int sig)
{
    (void)sig;
    gr_test_fail_from_signal("hung (alarm)");
}

/* A case's own SIGALRM and timer: the runner uses neither in the child. */
static void own_alarm(void)
{
    alarm_in_20_ms(on_alarm);
    ASSERT_EQ(rang, 1);
}

static void fails_from_signal(void)
{
    alarm_in_20_ms(on_alarm_fail);
}

/* An assertion failing in a process the case forked: that process says so and exits 1;
 * the case, which checks that, passes, and only it reports. */
static void forked_process_fails(void)
{
    int status;
    pid_t pid = fork();

    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        ASSERT_EQ(1 + 1, 3);
        _exit(0);
    }
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 1);
}

static void sets_state(void)
{
    state = 1;
}

static void sees_fresh_state(void)
{
    ASSERT_EQ(state, 0);
}

GR_TEST_MAIN(GR_TEST(passes), GR_TEST(fails_an_assertion), GR_TEST(fails_float_bits),
             GR_TEST(assertions_that_hold), GR_TEST(fails_double_near), GR_TEST(fails_str_eq),
             GR_TEST(fails_with_lines), GR_TEST(crashes), GR_TEST(skips), GR_TEST(exits),
             GR_TEST(hangs), GR_TEST(fails_after_passing), GR_TEST(own_alarm),
             GR_TEST(fails_from_signal), GR_TEST(forked_process_fails), GR_TEST(sets_state),
             GR_TEST(sees_fresh_state))
