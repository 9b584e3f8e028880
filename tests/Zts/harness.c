/*
 * The zts suite's harness: runs PHP requests on POSIX threads of one process, as FrankenPHP
 * does, with a thread-safe PHP's embed SAPI (libphp.so of tests/zts.sh). PHP starts once
 * (TSRM, the SAPI, the modules: the extension makes its segment there), then every thread takes
 * its own interpreter context (ts_resource) and serves requests on it: request startup, the
 * script, request shutdown.
 *
 *   harness [-t THREADS] [-r REQUESTS] [-w WAVES] [-f] [-d NAME=VALUE ...] SCRIPT [ARG ...]
 *
 *   -t   threads at once (default 1)
 *   -r   requests per thread (default 1)
 *   -w   waves of threads (default 1): each wave's threads are created, serve their requests and
 *        end (their contexts freed) before the next wave starts, as a server's pool churns
 *   -f   after PHP's startup, fork: the threads run in the child, the parent waits for it and
 *        shuts PHP down (as Apache's event MPM starts PHP in its parent and serves requests on
 *        threads of the children it forks)
 *   -d   an ini setting (extension=..., ganesha_shm.path=...), as php -d
 *
 * Each request runs SCRIPT with $argv = [SCRIPT, THREAD, REQUEST, WAVE, WAVES, ARG ...] (THREAD
 * counts the threads of every wave); its output goes
 * to standard output (one write per echo, so lines of concurrent requests do not mix when each
 * echoes a whole line). A script may call harness_barrier(), which returns once every thread of
 * the wave has called it: the threads then go on at the same instant.
 *
 * Exits 0 when every request ran to its end, 1 otherwise (a request that failed to start, a
 * fatal error: PHP's exit status), 2 on a usage error.
 */

/* As PHP's own sources are compiled: its headers use GNU extensions of the C library (memrchr). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <main/php.h>
#include <main/php_main.h>
#include <main/SAPI.h>
#include <sapi/embed/php_embed.h>
#include <TSRM.h>

#ifndef ZTS
#error "the harness runs PHP on threads: build it against a thread-safe PHP (tests/zts.sh)"
#endif

static const char *script;
static int script_argc;
static char **script_argv;
static int requests = 1;
static int threads = 1;
static int waves = 1;
static pthread_barrier_t barrier;
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;
static int failures;

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_harness_barrier, 0, 0, _IS_BOOL, 0)
ZEND_END_ARG_INFO()

/* harness_barrier(): waits for every thread of the wave (see above). */
ZEND_FUNCTION(harness_barrier)
{
    ZEND_PARSE_PARAMETERS_NONE();
    pthread_barrier_wait(&barrier);
    RETURN_TRUE;
}

static const zend_function_entry harness_functions[] = {
    ZEND_FE(harness_barrier, arginfo_harness_barrier)
    ZEND_FE_END
};

struct job {
    int thread;
    int wave;
};

static void failed(void)
{
    pthread_mutex_lock(&failures_lock);
    failures++;
    pthread_mutex_unlock(&failures_lock);
}

/* One request on this thread's context: what php_embed_init() and php_embed_shutdown() do
 * around a script, per request. */
static void serve(const struct job *job, int request)
{
    char thread[16], number[16], wave[16], wave_count[16];
    char **argv = calloc((size_t) script_argc + 6, sizeof *argv);
    snprintf(thread, sizeof thread, "%d", job->thread);
    snprintf(number, sizeof number, "%d", request);
    snprintf(wave, sizeof wave, "%d", job->wave);
    snprintf(wave_count, sizeof wave_count, "%d", waves);
    argv[0] = (char *) script;
    argv[1] = thread;
    argv[2] = number;
    argv[3] = wave;
    argv[4] = wave_count;
    for (int i = 0; i < script_argc; i++) {
        argv[5 + i] = script_argv[i];
    }
    SG(options) |= SAPI_OPTION_NO_CHDIR;
    SG(request_info).argc = script_argc + 5;
    SG(request_info).argv = argv;
    if (php_request_startup() == FAILURE) {
        fprintf(stderr, "harness: thread %d: request %d did not start\n", job->thread, request);
        failed();
        free(argv);
        return;
    }
    SG(headers_sent) = 1;
    SG(request_info).no_headers = 1;
    php_register_variable("PHP_SELF", "-", NULL);

    zend_file_handle file;
    zend_stream_init_filename(&file, script);
    php_execute_script(&file);
    if (EG(exit_status) != 0) {
        failed();
    }
    zend_destroy_file_handle(&file);
    php_request_shutdown(NULL);
    free(argv);
}

static void *run(void *argument)
{
    const struct job *job = argument;
    /* This thread's interpreter context, made on first use and freed when the thread ends. */
    (void) ts_resource(0);
    for (int request = 0; request < requests; request++) {
        serve(job, request);
    }
    ts_free_thread();
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: harness [-t THREADS] [-r REQUESTS] [-w WAVES] [-f] [-d NAME=VALUE ...] SCRIPT [ARG ...]\n");
    return 2;
}

static int positive(const char *text, int *value)
{
    char *end;
    long parsed = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || parsed < 1 || parsed > 100000) {
        return 0;
    }
    *value = (int) parsed;
    return 1;
}

int main(int argc, char **argv)
{
    int fork_first = 0, option;
    /* What php_embed_init() sets, PHP's errors logged to standard error (the embed SAPI's log;
     * display_errors=stderr is the CLI's alone, elsewhere errors are displayed into the
     * output), then the -d settings. */
    size_t ini_size = 4096;
    char *ini = malloc(ini_size);
    strcpy(ini, "html_errors=0\nregister_argc_argv=1\nimplicit_flush=1\noutput_buffering=0\n"
                "max_execution_time=0\nmax_input_time=-1\ndisplay_errors=0\nlog_errors=1\nerror_reporting=-1\n");
    while ((option = getopt(argc, argv, "+t:r:w:fd:")) != -1) {
        switch (option) {
        case 't':
            if (!positive(optarg, &threads)) return usage();
            break;
        case 'r':
            if (!positive(optarg, &requests)) return usage();
            break;
        case 'w':
            if (!positive(optarg, &waves)) return usage();
            break;
        case 'f':
            fork_first = 1;
            break;
        case 'd':
            if (strchr(optarg, '=') == NULL || strchr(optarg, '\n') != NULL) return usage();
            if (strlen(ini) + strlen(optarg) + 2 > ini_size) {
                ini_size = strlen(ini) + strlen(optarg) + 2;
                ini = realloc(ini, ini_size);
            }
            strcat(ini, optarg);
            strcat(ini, "\n");
            break;
        default:
            return usage();
        }
    }
    if (optind >= argc) return usage();
    script = argv[optind];
    script_argc = argc - optind - 1;
    script_argv = argv + optind + 1;

    php_tsrm_startup();
    zend_signal_startup();
    sapi_startup(&php_embed_module);
    php_embed_module.ini_entries = ini;
    php_embed_module.php_ini_ignore = 1;
    php_embed_module.additional_functions = harness_functions;
    if (php_embed_module.startup(&php_embed_module) == FAILURE) {
        fprintf(stderr, "harness: PHP did not start\n");
        return 1;
    }

    pid_t child = 0;
    if (fork_first) {
        child = fork();
        if (child < 0) {
            perror("harness: fork");
            return 1;
        }
    }
    if (child == 0) {
        pthread_t *ids = calloc((size_t) threads, sizeof *ids);
        struct job *jobs = calloc((size_t) threads, sizeof *jobs);
        for (int wave = 0; wave < waves; wave++) {
            pthread_barrier_init(&barrier, NULL, (unsigned) threads);
            for (int t = 0; t < threads; t++) {
                jobs[t] = (struct job) {.thread = wave * threads + t, .wave = wave};
                if (pthread_create(&ids[t], NULL, run, &jobs[t]) != 0) {
                    fprintf(stderr, "harness: could not create thread %d\n", t);
                    return 1;
                }
            }
            for (int t = 0; t < threads; t++) {
                pthread_join(ids[t], NULL);
            }
            pthread_barrier_destroy(&barrier);
        }
        free(ids);
        free(jobs);
        if (fork_first) {
            /* A served child exits without PHP's shutdown, as a server's children do. */
            fflush(stdout);
            _exit(failures == 0 ? 0 : 1);
        }
    } else {
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failures++;
        }
    }

    php_module_shutdown();
    sapi_shutdown();
    tsrm_shutdown();
    free(ini);
    return failures == 0 ? 0 : 1;
}
