/*
 * osu_ibcast for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_ibcast.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_ibcast osu_ibcast.c
 *
 * Each iteration is MPI_Ibcast of `size` MPI_CHARs; the root rotates every iteration in the
 * pure-communication loop and is rank 0 in the overlap loop (as OSU 7.4's osu_ibcast.c).
 * Sizes 1 B .. 1 MiB in powers of two.
 * osu_nbc.h has the method: the pure communication time (start, MPI_Wait), then the same
 * collective overlapped with a dummy computation as long as that time; rank 0 prints the
 * overall time, the computation, the pure communication time and the overlap in percent.
 * Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES -t CALLS. At least two ranks.
 */
#define TITLE "OSU MPI Non-Blocking Broadcast Latency Test"
#define NAME "osu_ibcast"
#include "osu_nbc.h"

static char *buf;

static void start(size_t size, int root, MPI_Request *request)
{
    MPI_Ibcast(buf, (int)size, MPI_CHAR, root, MPI_COMM_WORLD, request);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "ft", AT_LEAST_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    limit_to_memory(rank, 1);
    buf = alloc_buffer(rank, max_size, rank == 0);
    nbc_run(rank, nprocs, start, ROOT_ROTATE_PURE);
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
