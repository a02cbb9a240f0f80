/*
 * osu_reduce for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_reduce.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons
 * in bench/compare. Build: mpicc -O2 -o osu_reduce osu_reduce.c
 *
 * Per size, after a barrier, every iteration is MPI_Barrier then MPI_Reduce (MPI_SUM) of
 * `size` MPI_CHARs (OSU 7.4's default datatype) timed with MPI_Wtime on every rank; the root
 * rotates every iteration (i % ranks, as OSU 7.4 forces for reduce). -x untimed warm-up
 * iterations (default 100, 10 above 8 KiB), then -i timed ones (default 1000, 100 above
 * 8 KiB). A rank's latency is the mean of its timed reductions in microseconds; MIN, MAX and
 * SUM reductions to rank 0 give the average over the ranks that it prints (with -f also the
 * minimum, maximum and iterations), then a barrier. Sizes 1 B .. 1 MiB in powers of two.
 * Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES (buffer limit per rank). At least
 * two ranks.
 */
#define TITLE "OSU MPI Reduce Latency Test"
#define NAME "osu_reduce"
#include "osu_coll.h"

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "f", AT_LEAST_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    limit_to_memory(rank, 2);
    char *s_buf = alloc_buffer(rank, max_size, 1);
    char *r_buf = alloc_buffer(rank, max_size, 0);
    if (rank == 0) {
        printf("\n# %s v%s\n# Datatype: MPI_CHAR.\n%-10s%18s", TITLE, VERSION, "# Size",
               "Avg Latency(us)");
        if (full)
            printf("%18s%18s%12s", "Min Latency(us)", "Max Latency(us)", "Iterations");
        printf("\n");
        fflush(stdout);
    }

    for (size_t size = min_size; size <= max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        MPI_Barrier(MPI_COMM_WORLD);
        double timer = 0.0;
        for (long i = 0; i < iters + warm; i++) {
            int root = (int)(i % nprocs);
            MPI_Barrier(MPI_COMM_WORLD);
            double t_start = MPI_Wtime();
            MPI_Reduce(s_buf, r_buf, (int)size, MPI_CHAR, MPI_SUM, root, MPI_COMM_WORLD);
            double t_stop = MPI_Wtime();
            if (i >= warm)
                timer += t_stop - t_start;
        }
        report(rank, nprocs, size, timer * 1e6 / iters, iters);
        MPI_Barrier(MPI_COMM_WORLD);
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
    free(s_buf);
    free(r_buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
