/*
 * A host whose clock runs ahead (or behind), for the fleet tests: an LD_PRELOAD shim that adds
 * GANESHA_SHM_TEST_CLOCK_OFFSET seconds (a whole number, negative for behind) to the system
 * time, as clock_gettime(CLOCK_REALTIME, CLOCK_REALTIME_COARSE), gettimeofday() and time() read
 * it. CLOCK_MONOTONIC is left alone: staleness is judged on it, and no one steps it.
 *
 * PHP loads extensions with dlopen(…, RTLD_DEEPBIND), which makes the extension bind to libc's
 * functions before the global scope, so past this shim: dlopen() here clears RTLD_DEEPBIND.
 *
 * Built by the tests (tests/Support/SkewedClock.php):
 *   gcc -shared -fPIC -O2 -o skewed_clock.so skewed_clock.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);
typedef void *(*dlopen_fn)(const char *, int);

static long offset_s;
static clock_gettime_fn real_clock_gettime;
static gettimeofday_fn real_gettimeofday;
static dlopen_fn real_dlopen;

__attribute__((constructor)) static void skewed_clock_init(void)
{
    const char *offset = getenv("GANESHA_SHM_TEST_CLOCK_OFFSET");
    offset_s = offset != NULL ? strtol(offset, NULL, 10) : 0;
    real_clock_gettime = (clock_gettime_fn) dlsym(RTLD_NEXT, "clock_gettime");
    real_gettimeofday = (gettimeofday_fn) dlsym(RTLD_NEXT, "gettimeofday");
    real_dlopen = (dlopen_fn) dlsym(RTLD_NEXT, "dlopen");
}

int clock_gettime(clockid_t clock, struct timespec *now)
{
    if (real_clock_gettime == NULL) {
        skewed_clock_init();
    }
    int result = real_clock_gettime(clock, now);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        now->tv_sec += offset_s;
    }
    return result;
}

int gettimeofday(struct timeval *restrict now, void *restrict zone)
{
    if (real_gettimeofday == NULL) {
        skewed_clock_init();
    }
    int result = real_gettimeofday(now, zone);
    if (result == 0) {
        now->tv_sec += offset_s;
    }
    return result;
}

time_t time(time_t *out)
{
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
        return (time_t) -1;
    }
    if (out != NULL) {
        *out = now.tv_sec;
    }
    return now.tv_sec;
}

void *dlopen(const char *file, int mode)
{
    if (real_dlopen == NULL) {
        skewed_clock_init();
    }
    return real_dlopen(file, mode & ~RTLD_DEEPBIND);
}
