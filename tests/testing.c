/*
 * testing.c - the test harness runner (see testing.h).
 *
 * One case at a time: the runner forks a child into a process group of its own and waits,
 * with SIGCHLD blocked, in sigtimedwait for the child's exit or the case's deadline,
 * whichever comes first (no polling, no timer signal in the child). Then it kills the
 * child's process group with SIGKILL (the child itself if it ran out of time, and any
 * process the case forked and left) before it reaps the child, whose pid, the group's id,
 * cannot be reused until then.
 *
 * The child reports its outcome over a pipe, in one write of at most PIPE_BUF bytes (so it
 * is whole or absent, never torn): 'P' (passed), 'S' and the skip reason, or 'F' and the
 * failure message. It flushes stdout first, so what the case printed comes before its line.
 * Only the parent prints the PASS/FAIL/SKIP line, from the report and how the child ended,
 * so a case that crashes, hangs or exits on its own still gets exactly one. A report of
 * pass or skip counts only if the child then exits 0: the child ends with exit(), which runs
 * the sanitizers' exit checks (leaks; tsan's exit status after a race), and a non-zero
 * status there fails the case.
 *
 * The parent is single-threaded and calls neither the runtime nor CUDA, so each child
 * starts as a fresh process would. SIGINT, SIGTERM and SIGHUP are blocked in the parent
 * and waited for with SIGCHLD: one of them kills the running case's group, then ends the
 * runner by that signal (a child in its own group would not get the terminal's ^C, nor
 * Bazel's SIGTERM to the runner's group). The child restores the signal mask it inherited.
 */
#define _GNU_SOURCE /* pipe2 */
#include "tests/testing.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

const char *gr_test_current = "(none)";
const char *gr_test_skip_reason = NULL;

/* Set in the case's process before the case runs: where it reports (-1: --no-fork, print
 * the line here), and its pid, to tell a process the case forked from the case's own (0
 * outside any case). */
static int report_fd = -1;
static pid_t case_pid;

enum { REPORT_MAX = PIPE_BUF < 4096 ? PIPE_BUF : 4096 };

static size_t append(char *buf, size_t len, size_t cap, const char *s)
{
    while (*s != '\0' && len < cap)
        buf[len++] = *s++;
    return len;
}

/* The same, with each line after the first indented (see print_line). */
static size_t append_indented(char *buf, size_t len, size_t cap, const char *s)
{
    for (; *s != '\0' && len < cap; s++) {
        buf[len++] = *s;
        if (*s == '\n')
            len = append(buf, len, cap, "    ");
    }
    return len;
}

/* Async-signal-safe: write() only. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        len -= (size_t)w;
    }
}

/* The case's outcome: kind 'P' (passed), 'S' (skipped, `text` the reason) or 'F' (failed,
 * `text` the message), sent to the parent in one write, ended by a NUL (should two threads
 * fail at once, the parent reads the first). With --no-fork, where no parent prints, a
 * failure is printed here. A failure _exits(1). Async-signal-safe. */
static void report(char kind, const char *text)
{
    char buf[REPORT_MAX];
    size_t len = 0;

    if (case_pid != 0 && getpid() != case_pid) {
        /* A process the case forked: say what failed, not as a line tools/test counts. */
        len = append(buf, len, sizeof(buf) - 1, "    in a process forked by the case: ");
        len = append_indented(buf, len, sizeof(buf) - 1, text);
        buf[len++] = '\n';
        write_all(STDOUT_FILENO, buf, len);
        _exit(1);
    }
    if (report_fd >= 0) {
        buf[len++] = kind;
        len = append(buf, len, sizeof(buf) - 1, text);
        buf[len++] = '\0';
        write_all(report_fd, buf, len);
    } else if (kind == 'F') {
        len = append(buf, len, sizeof(buf) - 1, "FAIL ");
        len = append(buf, len, sizeof(buf) - 1, gr_test_current);
        len = append(buf, len, sizeof(buf) - 1, ": ");
        len = append_indented(buf, len, sizeof(buf) - 1, text);
        buf[len++] = '\n';
        write_all(STDOUT_FILENO, buf, len);
    }
    if (kind == 'F')
        _exit(1);
}

void gr__test_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[REPORT_MAX - 1];
    int n;
    va_list ap;

    fflush(stdout);
    fflush(stderr);
    n = snprintf(msg, sizeof(msg), "%s:%d: ", file, line);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof(msg)) {
        va_start(ap, fmt);
        vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    report('F', msg);
    _exit(1); /* not reached: report() exits on 'F' */
}

void gr_test_fail_from_signal(const char *message)
{
    report('F', message);
    _exit(1);
}

/* ------------------------------------------------------------------------------------- */
/* The parent. */

typedef struct outcome {
    char kind; /* 'P', 'S', 'F' */
    char text[REPORT_MAX + 200];
} outcome;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail_with(outcome *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_with(outcome *o, const char *fmt, ...)
{
    va_list ap;

    o->kind = 'F';
    va_start(ap, fmt);
    vsnprintf(o->text, sizeof(o->text), fmt, ap);
    va_end(ap);
}

/* In the child: run the case and report. Does not return. */
static _Noreturn void child_main(const gr_test_case *c, int fd, const sigset_t *mask)
{
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, mask, NULL);
    report_fd = fd;
    case_pid = getpid();
    gr_test_current = c->name;
    gr_test_skip_reason = NULL;
    c->fn();
    if (getpid() != case_pid) /* a forked process returned from the case */
        _exit(0);
    fflush(stdout);
    fflush(stderr);
    report(gr_test_skip_reason ? 'S' : 'P', gr_test_skip_reason ? gr_test_skip_reason : "");
    exit(0);
}

/* Reads what the child reported, if anything, without waiting on processes it left
 * holding the pipe. */
static size_t read_report(int fd, char *buf, size_t cap)
{
    size_t len = 0;

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (len < cap) {
        ssize_t r = read(fd, buf + len, cap - len);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    return len;
}

/* Waits for `pid` to exit by `deadline` (CLOCK_MONOTONIC seconds), leaving it unreaped (so
 * its pid, the group's id, cannot be reused before the group is killed); false when the
 * deadline passed first. A termination signal kills the child's group and ends the
 * runner by that signal. */
static bool wait_child(pid_t pid, double deadline, const sigset_t *waitset)
{
    for (;;) {
        double left = deadline - now_s();
        struct timespec ts;
        siginfo_t info;
        int sig;

        info.si_pid = 0;
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == pid)
            return true;
        if (left <= 0)
            return false;
        ts.tv_sec = (time_t)left;
        ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
        sig = sigtimedwait(waitset, &info, &ts);
        if (sig < 0 && errno != EAGAIN && errno != EINTR) {
            perror("testing: sigtimedwait");
            exit(2);
        }
        if (sig > 0 && sig != SIGCHLD) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fflush(stdout);
            signal(sig, SIG_DFL);
            sigprocmask(SIG_UNBLOCK, waitset, NULL);
            raise(sig);
            exit(2);
        }
    }
}

static void run_forked(const gr_test_case *c, double timeout_s, const sigset_t *waitset,
                       const sigset_t *child_mask, outcome *o)
{
    char rep[REPORT_MAX + 1];
    size_t len;
    int fds[2], status;
    bool exited;
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) != 0) {
        fail_with(o, "pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        fail_with(o, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(c, fds[1], child_mask);
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    close(fds[1]);
    exited = wait_child(pid, now_s() + timeout_s, waitset);
    kill(-pid, SIGKILL); /* the case if it ran out of time, and whatever it forked and left */
    kill(pid, SIGKILL);  /* should its setpgid have failed */
    waitpid(pid, &status, 0);
    len = read_report(fds[0], rep, sizeof(rep) - 1);
    close(fds[0]);
    rep[len] = '\0';

    if (!exited) {
        fail_with(o, "timed out after %g s", timeout_s);
    } else if (len > 0 && rep[0] == 'F') {
        fail_with(o, "%s", rep + 1);
    } else if (len > 0 && (rep[0] == 'P' || rep[0] == 'S')) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            o->kind = rep[0];
            snprintf(o->text, sizeof(o->text), "%s", rep + 1);
        } else if (WIFEXITED(status)) {
            fail_with(o, "exited with status %d after the case %s (a sanitizer's report "
                         "above?)", WEXITSTATUS(status), rep[0] == 'P' ? "passed" : "skipped");
        } else {
            fail_with(o, "killed by signal %d (%s) after the case %s", WTERMSIG(status),
                      strsignal(WTERMSIG(status)), rep[0] == 'P' ? "passed" : "skipped");
        }
    } else if (WIFSIGNALED(status)) {
        fail_with(o, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        fail_with(o, "exited with status %d without reporting", WEXITSTATUS(status));
    }
}

static void run_here(const gr_test_case *c, outcome *o)
{
    report_fd = -1;
    case_pid = getpid();
    gr_test_current = c->name;
    gr_test_skip_reason = NULL;
    c->fn();
    if (getpid() != case_pid)
        _exit(0);
    o->kind = gr_test_skip_reason ? 'S' : 'P';
    snprintf(o->text, sizeof(o->text), "%s", gr_test_skip_reason ? gr_test_skip_reason : "");
}

/* The case's one line. A message of several lines (a log quoted by an assertion) goes on
 * indented, so that no line of it counts as a case's. */
static void print_line(const outcome *o, const char *name)
{
    printf("%s %s", o->kind == 'P' ? "PASS" : o->kind == 'S' ? "SKIP" : "FAIL", name);
    if (o->kind != 'P') {
        fputs(": ", stdout);
        for (const char *p = o->text; *p != '\0'; p++) {
            putchar(*p);
            if (*p == '\n')
                fputs("    ", stdout);
        }
    }
    putchar('\n');
    fflush(stdout);
}

static _Noreturn void usage(const char *argv0, const char *why)
{
    fprintf(stderr,
            "%s: %s\nusage: %s [--only NAME] [--timeout SECONDS] [--no-fork] [--list]\n",
            argv0, why, argv0);
    exit(2);
}

static double parse_timeout(const char *argv0, const char *what, const char *v)
{
    char *end;
    double t;

    errno = 0;
    t = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || errno != 0 || !(t > 0) || t > 1e9) {
        char why[300];

        snprintf(why, sizeof(why), "bad %s '%s' (seconds, more than 0)", what, v);
        usage(argv0, why);
    }
    return t;
}

int gr_test_run(const gr_test_case *cases, size_t n, int argc, char **argv,
                double default_timeout_s)
{
    const char *only = NULL, *env = getenv("GR_TEST_TIMEOUT");
    double timeout_s = default_timeout_s;
    unsigned passed = 0, failed = 0, skipped = 0;
    sigset_t waitset, child_mask;
    bool fork_cases = true;

    if (env != NULL && *env != '\0')
        timeout_s = parse_timeout(argv[0], "GR_TEST_TIMEOUT", env);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strncmp(argv[i], "--only=", 7) == 0)
            only = argv[i] + 7;
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout_s = parse_timeout(argv[0], "--timeout", argv[++i]);
        else if (strncmp(argv[i], "--timeout=", 10) == 0)
            timeout_s = parse_timeout(argv[0], "--timeout", argv[i] + 10);
        else if (strcmp(argv[i], "--no-fork") == 0)
            fork_cases = false;
        else if (strcmp(argv[i], "--list") == 0) {
            for (size_t k = 0; k < n; k++)
                printf("%s\n", cases[k].name);
            return 0;
        } else
            usage(argv[0], "unknown or incomplete option");
    }
    if (only != NULL) {
        size_t i = 0;

        while (i < n && strcmp(cases[i].name, only) != 0)
            i++;
        if (i == n) {
            fprintf(stderr, "%s: no case named '%s'\n", argv[0], only);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    sigemptyset(&waitset);
    sigaddset(&waitset, SIGCHLD);
    sigaddset(&waitset, SIGINT);
    sigaddset(&waitset, SIGTERM);
    sigaddset(&waitset, SIGHUP);
    if (fork_cases) {
        /* SIGCHLD must not be ignored, or children are reaped for us. */
        signal(SIGCHLD, SIG_DFL);
        sigprocmask(SIG_BLOCK, &waitset, &child_mask);
    }

    for (size_t i = 0; i < n; i++) {
        outcome o;

        if (only && strcmp(only, cases[i].name) != 0)
            continue;
        if (fork_cases)
            run_forked(&cases[i], timeout_s, &waitset, &child_mask, &o);
        else
            run_here(&cases[i], &o);
        print_line(&o, cases[i].name);
        passed += o.kind == 'P';
        skipped += o.kind == 'S';
        failed += o.kind == 'F';
    }
    printf("# %u passed, %u failed, %u skipped\n", passed, failed, skipped);
    fflush(stdout);
    if (fork_cases)
        sigprocmask(SIG_SETMASK, &child_mask, NULL);
    return failed ? 1 : 0;
}

static int parse_flag(int argc, char **argv, int *i, const char *name, const char **value)
{
    size_t n = strlen(name);

    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *value = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] == '\0' && *i + 1 < argc) {
        *value = argv[++*i];
        return 1;
    }
    return 0;
}

void gr_stress_parse(int argc, char **argv, gr_stress_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *v;
        char *end;

        if (parse_flag(argc, argv, &i, "--threads", &v)) {
            o->threads = (unsigned)strtoul(v, &end, 10);
        } else if (parse_flag(argc, argv, &i, "--duration", &v)) {
            o->duration_s = strtod(v, &end);
        } else if (parse_flag(argc, argv, &i, "--seed", &v)) {
            o->seed = strtoull(v, &end, 0);
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--duration SECONDS] [--seed X]\n",
                    argv[0]);
            exit(2);
        }
        if (*v == '\0' || *end != '\0') {
            fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], v, flag);
            exit(2);
        }
    }
    if (o->threads == 0 || o->duration_s <= 0) {
        fprintf(stderr, "%s: --threads and --duration must be positive\n", argv[0]);
        exit(2);
    }
}
