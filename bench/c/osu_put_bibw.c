/*
 * osu_put_bibw for Open MPI and MPICH (and Kestrel): OSU Micro-Benchmarks 7.4's osu_put_bibw
 * (methodology, options and output), written for the comparisons in bench/compare. Build:
 * mpicc -O2 -o osu_put_bibw osu_put_bibw.c (osu_rma.h and osu_opts.h beside it). Run with
 * exactly 2 ranks.
 *
 * Both ranks put to each other. Per size (1 B .. 4 MiB in powers of two), a new window of
 * size * W bytes per rank (-W, default 64; -w: MPI_Win_allocate by default, or MPI_Win_create,
 * or MPI_Win_create_dynamic with the peer's address exchanged), then -x untimed warm-up
 * (default 10, 2 above 8 KiB) and -i timed (default 100, 20 above 8 KiB) iterations in which
 * each rank does W MPI_Put of `size` MPI_CHAR to consecutive places of the other's window,
 * within the -s synchronization, active target only as in OSU: pscw (default: post, start,
 * W puts, complete, wait) or fence (fence, W puts, fence). Reported as
 * 2 * size / 1e6 * W * -i / rank 0's time from the first timed iteration to the last, in MB/s.
 * Options: -w -s -h -v -m [MIN:]MAX -x ITER -i ITER -W SIZE -M BYTES (not OSU's: buffer limit
 * per rank).
 */
#define TITLE "OSU MPI_Put Bi-directional Bandwidth Test"
#define NAME "osu_put_bibw"
#define RMA_BW
#define RMA_ACTIVE_ONLY
#define RMA_SYNC_DEFAULT SYNC_PSCW
#include "osu_rma.h"

static void put(struct rma *r, int target, size_t offset)
{
    MPI_Put(r->buf + offset, (int)r->size, MPI_CHAR, target, r->disp + (MPI_Aint)offset,
            (int)r->size, MPI_CHAR, r->win);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = rma_begin(argc, argv, &rank, &nprocs);
    if (status >= 0)
        return status;
    rma_limit_to_memory(rank, 2);
    rma_header(rank, "MPI_CHAR");
    rma_bandwidth_sizes(rank, put, 1);
    rma_end();
    return EXIT_SUCCESS;
}
