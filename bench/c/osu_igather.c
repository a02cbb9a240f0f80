/*
 * osu_igather for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_igather.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_igather osu_igather.c
 *
 * Each iteration is MPI_Igather of `size` MPI_CHARs per rank to rank 0 (OSU's default root).
 * Sizes 1 B .. 1 MiB in powers of two.
 * osu_nbc.h has the method: the pure communication time (start, MPI_Wait), then the same
 * collective overlapped with a dummy computation as long as that time; rank 0 prints the
 * overall time, the computation, the pure communication time and the overlap in percent.
 * Options: -h -v -f -m [MIN:]MAX -i ITER -x ITER -M BYTES -t CALLS. At least two ranks.
 */
#define TITLE "OSU MPI Non-blocking Gather Latency Test"
#define NAME "osu_igather"
#include "osu_nbc.h"

static char *s_buf, *r_buf;

static void start(size_t size, int root, MPI_Request *request)
{
    MPI_Igather(s_buf, (int)size, MPI_CHAR, r_buf, (int)size, MPI_CHAR, root, MPI_COMM_WORLD,
                request);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "ft", AT_LEAST_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    limit_to_memory(rank, (size_t)nprocs + 1);
    s_buf = alloc_buffer(rank, max_size, 1);
    r_buf = rank == 0 ? alloc_buffer(rank, max_size * (size_t)nprocs, 0) : NULL;
    nbc_run(rank, nprocs, start, ROOT_FIXED);
    free(s_buf);
    free(r_buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
