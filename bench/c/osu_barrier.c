/*
 * osu_barrier for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_barrier.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons
 * in bench/compare. Build: mpicc -O2 -o osu_barrier osu_barrier.c
 *
 * Every rank times each MPI_Barrier with MPI_Wtime: -x untimed warm-up barriers (default 100),
 * then -i timed ones (default 1000). A rank's latency is the mean of its timed barriers in
 * microseconds; after a closing barrier, MIN, MAX and SUM reductions to rank 0 give the
 * average over the ranks that it prints (with -f also the minimum, maximum and iterations).
 * No message sizes: -m and -M are accepted and ignored (as in OSU), no size column, no
 * datatype line. Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES. At least two ranks.
 */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TITLE "OSU MPI Barrier Latency Test"
#define NAME "osu_barrier"
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
    printf("  -i, --iterations          ITER - set iterations per message size to ITER (default 1000 for small\n");
    printf("%28smessages, 100 for large messages)\n", "");
    printf("  -x, --warmup              ITER - set number of warmup\n");
    printf("%28siterations to skip before timing (default 200)\n", "");
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
    (void)size;
    printf("%17.2f", avg_time);
    if (full)
        printf("%18.2f%18.2f%12ld", min_time, max_time, iters);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, &rank, &nprocs);
    if (status >= 0)
        return status;
    if (rank == 0) {
        printf("\n# %s v%s\n# Avg Latency(us)", TITLE, VERSION);
        if (full)
            printf("%18s%18s%12s", "Min Latency(us)", "Max Latency(us)", "Iterations");
        printf("\n");
        fflush(stdout);
    }

    double timer = 0.0;
    for (long i = 0; i < iterations + skip; i++) {
        double t_start = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        double t_stop = MPI_Wtime();
        if (i >= skip)
            timer += t_stop - t_start;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    report(rank, nprocs, 0, timer * 1e6 / iterations, iterations);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
