/*
 * osu_bcast for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_bcast.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_bcast osu_bcast.c
 *
 * First an MPI_Alltoall of one int per rank so that every rank has met every other. Per size,
 * every iteration is MPI_Barrier, MPI_Bcast of `size` MPI_CHARs timed with MPI_Wtime on every
 * rank, MPI_Barrier; the root rotates every iteration (i % ranks, as OSU 7.4 forces for bcast).
 * -x untimed warm-up iterations (default 100, 10 above 8 KiB), then -i timed ones (default
 * 1000, 100 above 8 KiB). A rank's latency is the mean of its timed broadcasts in
 * microseconds; MIN, MAX and SUM reductions to rank 0 give the average over the ranks that it
 * prints (with -f also the minimum, maximum and iterations). Sizes 1 B .. 1 MiB in powers of
 * two. Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES (buffer limit per rank). At
 * least two ranks.
 */
#define TITLE "OSU MPI Broadcast Latency Test"
#define NAME "osu_bcast"
#include "osu_coll.h"

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "f", AT_LEAST_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    limit_to_memory(rank, 1);
    char *buf = alloc_buffer(rank, max_size, 1);
    if (rank == 0) {
        printf("\n# %s v%s\n# Datatype: MPI_CHAR.\n%-10s%18s", TITLE, VERSION, "# Size",
               "Avg Latency(us)");
        if (full)
            printf("%18s%18s%12s", "Min Latency(us)", "Max Latency(us)", "Iterations");
        printf("\n");
        fflush(stdout);
    }

    /* Everyone meets everyone before the timings. */
    int *hello = malloc(sizeof(int) * (size_t)nprocs), *met = malloc(sizeof(int) * (size_t)nprocs);
    if (!hello || !met)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = 0; r < nprocs; r++)
        hello[r] = rank;
    MPI_Alltoall(hello, 1, MPI_INT, met, 1, MPI_INT, MPI_COMM_WORLD);
    free(hello);
    free(met);

    for (size_t size = min_size; size <= max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        double timer = 0.0;
        for (long i = 0; i < iters + warm; i++) {
            int root = (int)(i % nprocs);
            MPI_Barrier(MPI_COMM_WORLD);
            double t_start = MPI_Wtime();
            MPI_Bcast(buf, (int)size, MPI_CHAR, root, MPI_COMM_WORLD);
            double t_stop = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            if (i >= warm)
                timer += t_stop - t_start;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        report(rank, nprocs, size, timer * 1e6 / iters, iters);
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
