/*
 * A host whose clock runs ahead (or behind), for the fleet tests: an LD_PRELOAD shim that adds
 * GANESHA_SHM_TEST_CLOCK_OFFSET seconds (a whole number, negative for behind) to the system
 * time, as clock_gettime(CLOCK_REALTIME, CLOCK_REALTIME_COARSE), gettimeofday() and time() read
 * it. CLOCK_MONOTONIC is left alone: staleness is judged on it, and no one steps it.
 *
 * A clock that steps: with GANESHA_SHM_TEST_CLOCK_FILE, the seconds in that file (one signed
 * 64-bit word, native byte order) are added too, read at every call through a shared mapping,
 * so that a test steps the clock of running processes by writing the file (SkewedClock::step()).
 *
 * PHP loads extensions with dlopen(…, RTLD_DEEPBIND), which makes the extension bind to libc's
 * functions before the global scope, so past this shim: dlopen() here clears RTLD_DEEPBIND.
 *
 * Built by the tests (tests/Support/SkewedClock.php):
 *   gcc -shared -fPIC -O2 -o skewed_clock.so skewed_clock.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);
typedef void *(*dlopen_fn)(const char *, int);

static long offset_s;
/* The step file's word, mapped; NULL without one. */
static volatile const int64_t *step_s;
static clock_gettime_fn real_clock_gettime;
static gettimeofday_fn real_gettimeofday;
static dlopen_fn real_dlopen;

/* The seconds to add now. */
static long shift_s(void)
{
    return offset_s + (step_s != NULL ? (long) *step_s : 0);
}

__attribute__((constructor)) static void skewed_clock_init(void)
{
    const char *offset = getenv("GANESHA_SHM_TEST_CLOCK_OFFSET");
    offset_s = offset != NULL ? strtol(offset, NULL, 10) : 0;
    const char *file = getenv("GANESHA_SHM_TEST_CLOCK_FILE");
    if (file != NULL && step_s == NULL) {
        int fd = open(file, O_RDONLY);
        if (fd >= 0) {
            void *word = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
            close(fd);
            if (word != MAP_FAILED) {
                step_s = word;
            }
        }
    }
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
        now->tv_sec += shift_s();
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
        now->tv_sec += shift_s();
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
