/* LD_PRELOAD shim that moves a process's wall clock (CLOCK_REALTIME, _COARSE) by the
 * signed number of microseconds written in the file named by
 * TRENDSYNC_TEST_CLOCK_SHIFT_FILE, re-read at most every REREAD_NS so a test can move
 * the clock of a running redis-server. libfaketime cannot: it allocates inside
 * clock_gettime, and jemalloc calls clock_gettime while allocating. So nothing here
 * allocates, and every clock is read with the raw syscall, never libc's wrapper. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define REREAD_NS 1000000LL

static long long shift_us, next_read_ns;

static long long shift(void) {
    struct timespec m;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &m);
    long long now = m.tv_sec * 1000000000LL + m.tv_nsec;
    if (now >= __atomic_load_n(&next_read_ns, __ATOMIC_ACQUIRE)) {
        const char *path = getenv("TRENDSYNC_TEST_CLOCK_SHIFT_FILE");
        char buf[32] = {0};
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            /* The test replaces the file by a rename: a read sees old or new, whole. */
            if (read(fd, buf, sizeof buf - 1) > 0)
                __atomic_store_n(&shift_us, strtoll(buf, NULL, 10), __ATOMIC_RELEASE);
            close(fd);
        }
        __atomic_store_n(&next_read_ns, now + REREAD_NS, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&shift_us, __ATOMIC_ACQUIRE);
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    long r = syscall(SYS_clock_gettime, clk, ts);
    if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
        long long us = shift(), ns = ts->tv_nsec + us % 1000000 * 1000;
        ts->tv_sec += us / 1000000 + (ns >= 1000000000LL) - (ns < 0);
        ts->tv_nsec = (ns + 1000000000LL) % 1000000000LL;
    }
    return (int)r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}
