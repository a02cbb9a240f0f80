/*
 * Shared by the collective C benchmarks (osu_allgather.c ... osu_scatter.c): options, help,
 * start-up, buffers and the OSU 7.4 report line, so that each benchmark file holds only its
 * loop. The including file defines TITLE (the benchmark's title line) and NAME (its program
 * name) first.
 */
#ifndef KESTREL_OSU_COLL_H
#define KESTREL_OSU_COLL_H

#if !defined(TITLE) || !defined(NAME)
#error "define TITLE and NAME before including osu_coll.h"
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

static size_t min_size = 1, max_size = 1 << 20;
static long iterations = 1000, iterations_large = 100, skip = 100, skip_large = 10;
static long mem_limit = MEM_LIMIT_DEFAULT;
static int mem_warning = 0, full = 0;

enum { OK, HELP, VERSION_MSG, BAD };
static const char *bad_message;
static char bad_option[64];
static const char *bad_arg;

static void help(void)
{
    printf("Usage: %s [options]\nOptions:\n", NAME);
    printf("  -h, --help                print this help\n");
    printf("  -v, --version             print version info\n");
    printf("  -f, --full                print full format listing (MIN/MAX latency and ITERATIONS\n");
    printf("%28sdisplayed in addition to AVERAGE latency)\n", "");
    printf("  -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n");
    printf("%28sbytes respectively. Examples:\n", "");
    printf("%28s-m 128      // min = default, max = 128\n", "");
    printf("%28s-m 2:128    // min = 2, max = 128\n", "");
    printf("%28s-m 2:       // min = 2, max = default\n", "");
    printf("  -i, --iterations          ITER - set iterations per message size to ITER (default 1000 for small\n");
    printf("%28smessages, 100 for large messages)\n", "");
    printf("  -x, --warmup              ITER - set number of warmup\n");
    printf("%28siterations to skip before timing (default 200)\n", "");
    printf("  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n");
    printf("%28s(default 536870912)\n", "");
}

/* OSU's set_message_size: MAX, MIN:MAX, MIN: or :MAX. */
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

static int parse(int argc, char **argv)
{
    static const struct option longs[] = {
        {"help", no_argument, 0, 'h'},          {"version", no_argument, 0, 'v'},
        {"full", no_argument, 0, 'f'},          {"message-size", required_argument, 0, 'm'},
        {"iterations", required_argument, 0, 'i'}, {"warmup", required_argument, 0, 'x'},
        {"mem-limit", required_argument, 0, 'M'},  {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hvfm:i:x:M:", longs, NULL)) != -1) {
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
            bad_message = "Invalid option";
            bad_arg = NULL;
            if (optopt)
                snprintf(bad_option, sizeof bad_option, "-%c", optopt);
            else
                snprintf(bad_option, sizeof bad_option, "%.*s", (int)strcspn(argv[optind - 1], "="),
                         argv[optind - 1]);
            return BAD;
        }
    }
    return OK;
}

/* Parses the options, starts MPI and handles -h, -v, bad options and fewer than two ranks
 * (returning the exit status for main, after MPI_Finalize), or returns -1 to run. */
static int begin(int argc, char **argv, int *rank, int *nprocs)
{
    int po = parse(argc, argv);
    MPI_Init(&argc, &argv);
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
    if (*nprocs < 2) {
        if (*rank == 0)
            fprintf(stderr, "This test requires at least two processes\n");
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    if (*rank == 0 && mem_warning)
        fprintf(stderr, "Requested memory limit too low, using [%ld] instead.\n", MEM_LIMIT_MIN);
    return -1;
}

/* -M: the largest size whose buffers (BLOCKS bytes per message byte) fit in the limit. */
static void limit_to_memory(int rank, size_t blocks)
{
    if (blocks == 0)
        return;
    size_t fits = (size_t)mem_limit / blocks;
    if (max_size > fits) {
        max_size = fits;
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }
}

static char *alloc_buffer(int rank, size_t bytes, int fill)
{
    char *p = NULL;
    if (posix_memalign((void **)&p, 4096, bytes + 1)) {
        fprintf(stderr, "rank %d: cannot allocate buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, fill, bytes + 1);
    return p;
}

/* OSU's statistics: MIN, MAX and SUM of the ranks' mean latencies reduced to rank 0, which
 * prints the average (and with -f the minimum, maximum and timed iterations). */
static void report(int rank, int nprocs, size_t size, double latency, long iters)
{
    double min_time = 0.0, max_time = 0.0, avg_time = 0.0;
    MPI_Reduce(&latency, &min_time, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency, &max_time, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency, &avg_time, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    avg_time /= nprocs;
    if (rank != 0)
        return;
    printf("%-10zu%18.2f", size, avg_time);
    if (full)
        printf("%18.2f%18.2f%12ld", min_time, max_time, iters);
    printf("\n");
    fflush(stdout);
}

#endif /* KESTREL_OSU_COLL_H */
