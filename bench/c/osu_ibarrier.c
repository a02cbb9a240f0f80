/*
 * osu_ibarrier for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_ibarrier.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_ibarrier osu_ibarrier.c
 *
 * Each iteration is MPI_Ibarrier. As in OSU it runs once with the large counts (-i 100 -x 10
 * by default), has no size column and no datatype line, and accepts -m and -M unused.
 * osu_nbc.h has the method: the pure communication time (start, MPI_Wait), then the same
 * collective overlapped with a dummy computation as long as that time; rank 0 prints the
 * overall time, the computation, the pure communication time and the overlap in percent.
 * Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES -t CALLS. At least two ranks.
 */
#define TITLE "OSU MPI Non-blocking Barrier Latency Test"
#define NAME "osu_ibarrier"
#define NO_SIZES 1
#include "osu_nbc.h"

static void start(size_t size, int root, MPI_Request *request)
{
    (void)size;
    (void)root;
    MPI_Ibarrier(MPI_COMM_WORLD, request);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "ft", AT_LEAST_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    nbc_run(rank, nprocs, start, ROOT_FIXED);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
