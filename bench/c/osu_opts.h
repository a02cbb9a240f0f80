/*
 * The option handling every C benchmark shares (OSU 7.4's options, messages and limits), so
 * that osu_latency.c, osu_barrier.c, osu_bw.h and osu_coll.h hold only what differs.
 *
 * The including file defines TITLE and NAME, and may define the defaults OSU_MIN_SIZE,
 * OSU_MAX_SIZE, OSU_ITERATIONS, OSU_ITERATIONS_LARGE, OSU_SKIP, OSU_SKIP_LARGE; it passes
 * parse() the optional options it takes ("f" for -f/--full, "W" for -W/--window-size, "t" for
 * the nonblocking collectives' -t/--num-test-calls) and defines help() (declared here, used by
 * begin()).
 */
#ifndef KESTREL_OSU_OPTS_H
#define KESTREL_OSU_OPTS_H

#if !defined(TITLE) || !defined(NAME)
#error "define TITLE and NAME before including osu_opts.h"
#endif

#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERSION "7.4"
#define LARGE_MESSAGE_SIZE 8192
#define MEM_LIMIT_DEFAULT (512L * 1024 * 1024)
#define MEM_LIMIT_MIN (1L * 1024 * 1024)

#ifndef OSU_MIN_SIZE
#define OSU_MIN_SIZE 1
#endif
#ifndef OSU_MAX_SIZE
#define OSU_MAX_SIZE (1 << 20)
#endif
#ifndef OSU_ITERATIONS
#define OSU_ITERATIONS 1000
#endif
#ifndef OSU_ITERATIONS_LARGE
#define OSU_ITERATIONS_LARGE 100
#endif
#ifndef OSU_SKIP
#define OSU_SKIP 100
#endif
#ifndef OSU_SKIP_LARGE
#define OSU_SKIP_LARGE 10
#endif

static size_t min_size = OSU_MIN_SIZE, max_size = OSU_MAX_SIZE;
static long iterations = OSU_ITERATIONS, iterations_large = OSU_ITERATIONS_LARGE;
static long skip = OSU_SKIP, skip_large = OSU_SKIP_LARGE;
static long window = 64;
static long num_probes = 0; /* -t: MPI_Test calls during a nonblocking test's computation */
/* -p PAIRS (0: ranks / 2) and -R 0|1 (print the message rate) of osu_mbw_mr (OSU_MBW). */
static long pairs = 0;
static int print_rate = 1;
/* -t SENDERS[:RECEIVERS] of the multithreaded tests (OSU_THREADS defined), OSU's defaults. */
static long threads_sender = 1, threads_receiver = 2;

/* OSU's -t of the multithreaded tests: N (the receivers; one sender) or SENDERS:RECEIVERS,
 * each 1..128. */
__attribute__((unused)) static int set_threads(const char *val)
{
    char *end = NULL;
    long s = 1, r = strtol(val, &end, 10);
    if (end && *end == ':') {
        s = r;
        r = strtol(end + 1, &end, 10);
    }
    if (!end || *end || s < 1 || s > 128 || r < 1 || r > 128)
        return -1;
    threads_sender = s;
    threads_receiver = r;
    return 0;
}
static long mem_limit = MEM_LIMIT_DEFAULT;
static int mem_warning = 0, full = 0;

enum { OK, HELP, VERSION_MSG, BAD };
static const char *bad_message;
static char bad_option[64];
static const char *bad_arg;

static void help(void);

static int set_message_size(const char *val)
{
    int colons = 0;
    for (const char *p = val; *p; p++)
        colons += *p == ':';
    if (colons == 0) {
        long long v = atoll(val);
        if (v < 0)
            return -1;
        max_size = (size_t)v;
        return 0;
    }
    if (colons > 1)
        return -1;
    const char *c = strchr(val, ':');
    int has1 = c != val, has2 = c[1] != '\0';
    if (has1 && has2) {
        long long a = atoll(val), b = atoll(c + 1);
        if (a > 0)
            min_size = (size_t)a;
        if (b < 0)
            return -1;
        max_size = (size_t)b;
        return 0;
    }
    if (has2) {
        long long b = atoll(c + 1);
        if (b < 0)
            return -1;
        max_size = (size_t)b;
        return 0;
    }
    if (has1) {
        long long a = atoll(val);
        if (a <= 0)
            return -1;
        min_size = (size_t)a;
        return 0;
    }
    return -1;
}

/* The option just read is not one this benchmark takes. */
static int invalid_option(char **argv)
{
    bad_message = "Invalid option";
    bad_arg = NULL;
    if (optopt)
        snprintf(bad_option, sizeof bad_option, "-%c", optopt);
    else
        snprintf(bad_option, sizeof bad_option, "%.*s", (int)strcspn(argv[optind - 1], "="),
                 argv[optind - 1]);
    return BAD;
}

/* Parses the options; OPTIONAL names the optional ones this benchmark takes ("f", "W", "t"). */
static int parse(int argc, char **argv, const char *optional)
{
    int takes_full = strchr(optional, 'f') != NULL, takes_window = strchr(optional, 'W') != NULL;
    int takes_probes = strchr(optional, 't') != NULL;
    static const struct option all[] = {
        {"help", no_argument, 0, 'h'},          {"version", no_argument, 0, 'v'},
        {"full", no_argument, 0, 'f'},          {"message-size", required_argument, 0, 'm'},
        {"warmup", required_argument, 0, 'x'},  {"iterations", required_argument, 0, 'i'},
        {"mem-limit", required_argument, 0, 'M'}, {"window-size", required_argument, 0, 'W'},
#ifdef OSU_THREADS
        {"num_threads", required_argument, 0, 't'}, {0, 0, 0, 0}};
#else
        {"num-test-calls", required_argument, 0, 't'},
#ifdef OSU_MBW
        {"pairs", required_argument, 0, 'p'}, {"print-rate", required_argument, 0, 'R'},
#endif
        {0, 0, 0, 0}};
#endif
    struct option longs[sizeof all / sizeof all[0]];
    size_t n = 0;
    for (size_t k = 0; all[k].name; k++)
        if ((all[k].val != 'f' || takes_full) && (all[k].val != 'W' || takes_window) &&
            (all[k].val != 't' || takes_probes))
            longs[n++] = all[k];
    longs[n] = all[sizeof all / sizeof all[0] - 1];
    char shorts[32] = "+:hvm:x:i:M:";
    if (takes_full)
        strcat(shorts, "f");
    if (takes_window)
        strcat(shorts, "W:");
    if (takes_probes)
        strcat(shorts, "t:");
#ifdef OSU_MBW
    strcat(shorts, "p:R:");
#endif
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        snprintf(bad_option, sizeof bad_option, "-%c", c);
        bad_arg = optarg;
        switch (c) {
        case 'h': return HELP;
        case 'v': return VERSION_MSG;
        case 'f': full = 1; break;
        case 'm':
            if (set_message_size(optarg)) { bad_message = "Invalid Message Size"; return BAD; }
            break;
        case 'i':
            if (atoi(optarg) < 1) { bad_message = "Invalid Number of Iterations"; return BAD; }
            iterations = iterations_large = atoi(optarg);
            break;
        case 'x':
            if (atoi(optarg) < 0) { bad_message = "Invalid Number of Warmup Iterations"; return BAD; }
            skip = skip_large = atoi(optarg);
            break;
        case 'W':
            if (atoi(optarg) < 1) { bad_message = "Invalid Window Size"; return BAD; }
            window = atoi(optarg);
            break;
        case 't':
#ifdef OSU_THREADS
            if (set_threads(optarg)) { bad_message = "Invalid Number of Threads"; return BAD; }
#else
            if (atoi(optarg) < 0) { bad_message = "Invalid Number of Probes"; return BAD; }
            num_probes = atoi(optarg);
#endif
            break;
#ifdef OSU_MBW
        case 'p':
            if (atoi(optarg) < 1) { bad_message = "Invalid Number of Pairs"; return BAD; }
            pairs = atoi(optarg);
            break;
        case 'R':
            if (strcmp(optarg, "0") && strcmp(optarg, "1")) { bad_message = "Invalid Argument"; return BAD; }
            print_rate = atoi(optarg);
            break;
#endif
        case 'M':
            mem_limit = atoll(optarg);
            if (mem_limit < MEM_LIMIT_MIN) { mem_limit = MEM_LIMIT_MIN; mem_warning = 1; }
            break;
        case ':':
            bad_message = "Option Missing Required Argument";
            snprintf(bad_option, sizeof bad_option, "-%c", optopt);
            bad_arg = NULL;
            return BAD;
        default:
            return invalid_option(argv);
        }
    }
    return OK;
}

enum { AT_LEAST_TWO, EXACTLY_TWO };

/* Parses the options (OPTIONAL as for parse), starts MPI and handles -h, -v, bad options and
 * a wrong number of ranks (RANKS: AT_LEAST_TWO or EXACTLY_TWO), returning the exit status for
 * main after MPI_Finalize; or returns -1 to run. */
static int begin(int argc, char **argv, const char *optional, int ranks, int *rank, int *nprocs)
{
    int po = parse(argc, argv, optional);
#ifdef OSU_THREADS
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI_Init_thread must return MPI_THREAD_MULTIPLE!\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
#else
    MPI_Init(&argc, &argv);
#endif
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, nprocs);
    if (po != OK) {
        if (*rank == 0) {
            if (po == BAD) {
                if (bad_arg)
                    fprintf(stderr, "%s [%s %s]\n\n", bad_message, bad_option, bad_arg);
                else
                    fprintf(stderr, "%s [%s]\n\n", bad_message, bad_option);
            }
            if (po == VERSION_MSG)
                printf("# %s v%s\n", TITLE, VERSION);
            else
                help();
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
        return po == BAD ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    if (ranks == EXACTLY_TWO ? *nprocs != 2 : *nprocs < 2) {
        if (*rank == 0)
            fprintf(stderr, "This test requires %s two processes\n",
                    ranks == EXACTLY_TWO ? "exactly" : "at least");
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    if (*rank == 0 && mem_warning)
        fprintf(stderr, "Requested memory limit too low, using [%ld] instead.\n", MEM_LIMIT_MIN);
    return -1;
}

#endif /* KESTREL_OSU_OPTS_H */
