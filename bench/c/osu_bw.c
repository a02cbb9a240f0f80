/*
 * osu_bw for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_bw.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_bw osu_bw.c
 *
 * Per iteration rank 0 starts -W (default 64) MPI_Isend of `size` bytes (tag 100), waits for
 * all, then receives a 4-byte acknowledgement (tag 101); rank 1 posts -W MPI_Irecv, each into
 * its own buffer, waits for all and sends the acknowledgement. Per size: a barrier, -x
 * untimed warm-up iterations (default 10, 2 above 8 KiB), then -i iterations (default 100, 20
 * above 8 KiB) each timed on rank 0 with MPI_Wtime; reported as size * W * iterations / time
 * in MB/s (10^6 bytes). Sizes 1 B .. 4 MiB in powers of two. Options: -h -v -m [MIN:]MAX
 * -x ITER -i ITER -W SIZE -M BYTES (buffer limit per rank).
 */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TITLE "OSU MPI Bandwidth Test"
#define NAME "osu_bw"
#define VERSION "7.4"
#define LARGE_MESSAGE_SIZE 8192
#define MEM_LIMIT_DEFAULT (512L * 1024 * 1024)
#define MEM_LIMIT_MIN (1L * 1024 * 1024)

static size_t min_size = 1, max_size = 1 << 22;
static long iterations = 100, iterations_large = 20, skip = 10, skip_large = 2;
static long window = 64;
static long mem_limit = MEM_LIMIT_DEFAULT;
static int mem_warning = 0;

enum { OK, HELP, VERSION_MSG, BAD };
static const char *bad_message;
static char bad_option[64];
static const char *bad_arg;

static void help(void)
{
    printf("Usage: %s [options]\nOptions:\n", NAME);
    printf("  -h, --help                print this help\n");
    printf("  -v, --version             print version info\n");
    printf("  -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n");
    printf("%28sbytes respectively. Examples:\n", "");
    printf("%28s-m 128      // min = default, max = 128\n", "");
    printf("%28s-m 2:128    // min = 2, max = 128\n", "");
    printf("%28s-m 2:       // min = 2, max = default\n", "");
    printf("  -x, --warmup              ITER - set number of warmup\n");
    printf("%28siterations to skip before timing (default 200)\n", "");
    printf("  -i, --iterations          ITER - number of iterations for timing (default 10000)\n");
    printf("  -W, --window-size         SIZE - set number of messages to send before synchronization (default 64)\n");
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
        {"message-size", required_argument, 0, 'm'}, {"warmup", required_argument, 0, 'x'},
        {"iterations", required_argument, 0, 'i'},   {"mem-limit", required_argument, 0, 'M'},
        {"window-size", required_argument, 0, 'W'},
        {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hvm:x:i:W:M:", longs, NULL)) != -1) {
        snprintf(bad_option, sizeof bad_option, "-%c", c);
        bad_arg = optarg;
        switch (c) {
        case 'h': return HELP;
        case 'v': return VERSION_MSG;
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

int main(int argc, char **argv)
{
    int rank, nprocs;
    int po = parse(argc, argv);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (po != OK) {
        if (rank == 0) {
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
    if (nprocs != 2) {
        if (rank == 0)
            fprintf(stderr, "This test requires exactly two processes\n");
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    if (rank == 0 && mem_warning)
        fprintf(stderr, "Requested memory limit too low, using [%ld] instead.\n", MEM_LIMIT_MIN);
    /* Per rank: a send buffer and one receive buffer per message of a window. */
    if (max_size > (size_t)mem_limit / (size_t)(window + 1)) {
        max_size = (size_t)mem_limit / (size_t)(window + 1);
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }

    char *s_buf = NULL, *r_buf = NULL;
    size_t s_len = max_size < 4 ? 4 : max_size;
    size_t r_len = (rank == 1) ? max_size * (size_t)window : 0;
    if (r_len < 4)
        r_len = 4;
    MPI_Request *reqs = malloc(2 * (size_t)window * sizeof *reqs);
    MPI_Status *stats = malloc((size_t)window * sizeof *stats);
    if (!reqs || !stats || posix_memalign((void **)&s_buf, 4096, s_len) ||
        posix_memalign((void **)&r_buf, 4096, r_len)) {
        fprintf(stderr, "rank %d: cannot allocate buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        printf("\n# %s v%s\n# Datatype: MPI_CHAR.\n%-10s%18s\n", TITLE, VERSION, "# Size",
               "Bandwidth (MB/s)");
        fflush(stdout);
    }

    int peer = 1 - rank;
    for (size_t size = min_size; size <= max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        memset(s_buf, 'a', size);
        memset(r_buf, 'b', (rank == 1) ? size * (size_t)window : 4);
        MPI_Barrier(MPI_COMM_WORLD);
        double t_total = 0.0;
        for (long i = 0; i < iters + warm; i++) {
            if (rank == 0) {
                double t_start = MPI_Wtime();
                for (long j = 0; j < window; j++)
                    MPI_Isend(s_buf, (int)size, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall((int)window, reqs, stats);
                MPI_Recv(r_buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= warm)
                    t_total += MPI_Wtime() - t_start;
            } else {
                for (long j = 0; j < window; j++)
                    MPI_Irecv(r_buf + (size_t)j * size, (int)size, MPI_CHAR, peer, 100,
                              MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall((int)window, reqs, stats);
                MPI_Send(s_buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            double bytes = (double)size / 1e6 * (double)iters * (double)window * 1.0;
            printf("%-10zu%18.2f\n", size, bytes / t_total);
            fflush(stdout);
        }
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
    free(reqs);
    free(stats);
    free(s_buf);
    free(r_buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
