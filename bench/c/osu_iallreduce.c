/*
 * osu_iallreduce for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_iallreduce.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_iallreduce osu_iallreduce.c
 *
 * Each iteration is MPI_Iallreduce (MPI_SUM) of `size` MPI_CHARs (OSU 7.4's default datatype).
 * Sizes 1 B .. 1 MiB in powers of two.
 * osu_nbc.h has the method: the pure communication time (start, MPI_Wait), then the same
 * collective overlapped with a dummy computation as long as that time; rank 0 prints the
 * overall time, the computation, the pure communication time and the overlap in percent.
 * Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES -t CALLS. At least two ranks.
 */
#define TITLE "OSU MPI Non-blocking Allreduce Latency Test"
#define NAME "osu_iallreduce"
#include "osu_nbc.h"

static char *s_buf, *r_buf;

static void start(size_t size, int root, MPI_Request *request)
{
    (void)root;
    MPI_Iallreduce(s_buf, r_buf, (int)size, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD, request);
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
    nbc_run(rank, nprocs, start, ROOT_FIXED);
    free(s_buf);
    free(r_buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
