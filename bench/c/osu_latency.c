/*
 * osu_latency for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_latency.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons
 * in bench/compare. Build: mpicc -O2 -o osu_latency osu_latency.c
 *
 * Ping-pong between ranks 0 and 1 with MPI_Send/MPI_Recv (tag 1). Per size: a barrier, -x
 * untimed warm-up round trips (default 100, 10 above 8 KiB), then -i round trips (default
 * 10000, 1000 above 8 KiB) each timed on rank 0 with MPI_Wtime; reported as half the average
 * round trip in microseconds. Sizes 1 B .. 4 MiB in powers of two (size 0 is skipped, as in
 * OSU 7.4). Options: -h -v -m [MIN:]MAX -x ITER -i ITER -M BYTES (buffer limit per rank).
 */
#define TITLE "OSU MPI Latency Test"
#define NAME "osu_latency"
#define OSU_MIN_SIZE 0
#define OSU_MAX_SIZE (1 << 22)
#define OSU_ITERATIONS 10000
#define OSU_ITERATIONS_LARGE 1000
#define OSU_SKIP 100
#define OSU_SKIP_LARGE 10
#include "osu_opts.h"

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
    printf("  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n");
    printf("%28s(default 536870912)\n", "");
}

/* OSU's set_message_size: MAX, MIN:MAX, MIN: or :MAX. */
int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "", EXACTLY_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    if (max_size > (size_t)mem_limit / 2) {
        max_size = (size_t)mem_limit / 2;
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }

    char *s_buf = NULL, *r_buf = NULL;
    if (posix_memalign((void **)&s_buf, 4096, max_size + 1) ||
        posix_memalign((void **)&r_buf, 4096, max_size + 1)) {
        fprintf(stderr, "rank %d: cannot allocate buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        printf("\n# %s v%s\n# Datatype: MPI_CHAR.\n%-10s%18s\n", TITLE, VERSION, "# Size",
               "Avg Latency(us)");
        fflush(stdout);
    }

    int peer = 1 - rank;
    for (size_t size = min_size; size <= max_size; size = size ? size * 2 : 1) {
        if (size == 0)
            continue;
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        memset(s_buf, 'a', size);
        memset(r_buf, 'b', size);
        MPI_Barrier(MPI_COMM_WORLD);
        double t_total = 0.0;
        for (long i = 0; i < iters + warm; i++) {
            if (rank == 0) {
                double t_start = MPI_Wtime();
                MPI_Send(s_buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(r_buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= warm)
                    t_total += MPI_Wtime() - t_start;
            } else {
                MPI_Recv(r_buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(s_buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            printf("%-10zu%18.2f\n", size, t_total * 1e6 / (2.0 * iters));
            fflush(stdout);
        }
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
    free(s_buf);
    free(r_buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
