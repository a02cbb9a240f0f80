/*
 * osu_ireduce for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_ireduce.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_ireduce osu_ireduce.c
 *
 * Each iteration is MPI_Ireduce (MPI_SUM) of `size` MPI_CHARs to a root that rotates every
 * iteration (i % ranks, as OSU 7.4 forces). Sizes 1 B .. 1 MiB in powers of two.
 * osu_nbc.h has the method: the pure communication time (start, MPI_Wait), then the same
 * collective overlapped with a dummy computation as long as that time; rank 0 prints the
 * overall time, the computation, the pure communication time and the overlap in percent.
 * Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES -t CALLS. At least two ranks.
 */
#define TITLE "OSU MPI Non-blocking Reduce Latency Test"
#define NAME "osu_ireduce"
#include "osu_nbc.h"

static char *s_buf, *r_buf;

static void start(size_t size, int root, MPI_Request *request)
{
    MPI_Ireduce(s_buf, r_buf, (int)size, MPI_CHAR, MPI_SUM, root, MPI_COMM_WORLD, request);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "ft", AT_LEAST_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    limit_to_memory(rank, 2);
    s_buf = alloc_buffer(rank, max_size, 1);
    r_buf = alloc_buffer(rank, max_size, 0);
    nbc_run(rank, nprocs, start, ROOT_ROTATE);
    free(s_buf);
    free(r_buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
