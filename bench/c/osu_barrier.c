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
#define TITLE "OSU MPI Barrier Latency Test"
#define NAME "osu_barrier"
#include "osu_opts.h"

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
    int status = begin(argc, argv, "f", AT_LEAST_TWO, &rank, &nprocs);
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
