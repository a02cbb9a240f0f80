/*
 * osu_get_bw for Open MPI and MPICH (and Kestrel): OSU Micro-Benchmarks 7.4's osu_get_bw
 * (methodology, options and output), written for the comparisons in bench/compare. Build:
 * mpicc -O2 -o osu_get_bw osu_get_bw.c (osu_rma.h and osu_opts.h beside it). Run with exactly
 * 2 ranks.
 *
 * Rank 0 is the origin, rank 1 the target. Per size (1 B .. 4 MiB in powers of two), a new
 * window of size * W bytes per rank (-W, default 64; -w: MPI_Win_allocate by default, or
 * MPI_Win_create, or MPI_Win_create_dynamic with the target's address exchanged), then -x
 * untimed warm-up (default 10, 2 above 8 KiB) and -i timed (default 100, 20 above 8 KiB)
 * iterations of W MPI_Get of `size` MPI_CHAR from consecutive places of rank 1's window into
 * consecutive places of rank 0's buffer, followed by the -s synchronization: flush (default:
 * one MPI_Win_flush, all within one MPI_Win_lock(SHARED)/unlock), flush_local, lock (lock
 * SHARED, W gets, unlock), lock_all, fence (rank 0 fence, W gets, fence; rank 1 fence, fence)
 * or pscw (rank 0 start, W gets, complete; rank 1 post, wait). Reported as
 * size / 1e6 * W * -i / rank 0's time from the first timed iteration to the last, in MB/s.
 * Options: -w -s -h -v -m [MIN:]MAX -x ITER -i ITER -W SIZE -M BYTES (not OSU's: buffer limit
 * per rank).
 */
#define TITLE "OSU MPI_Get Bandwidth Test"
#define NAME "osu_get_bw"
#define RMA_BW
#include "osu_rma.h"

static void get(struct rma *r, int target, size_t offset)
{
    MPI_Get(r->buf + offset, (int)r->size, MPI_CHAR, target, r->disp + (MPI_Aint)offset,
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
    rma_bandwidth_sizes(rank, get, 0);
    rma_end();
    return EXIT_SUCCESS;
}
