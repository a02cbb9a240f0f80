/*
 * osu_get_latency for Open MPI and MPICH (and Kestrel): OSU Micro-Benchmarks 7.4's
 * osu_get_latency (methodology, options and output; OSU's title spells "latency" in lower
 * case), written for the comparisons in bench/compare. Build:
 * mpicc -O2 -o osu_get_latency osu_get_latency.c (osu_rma.h and osu_opts.h beside it). Run
 * with exactly 2 ranks.
 *
 * Rank 0 is the origin, rank 1 the target. Per size (1 B .. 4 MiB in powers of two), a new
 * window of `size` bytes per rank (-w: MPI_Win_allocate by default, or MPI_Win_create, or
 * MPI_Win_create_dynamic with the target's address exchanged), then -x untimed warm-up
 * (default 100, 10 above 8 KiB) and -i timed (default 10000, 1000 above 8 KiB) MPI_Get of
 * `size` MPI_CHAR from displacement 0 of rank 1's window, each completed by the -s
 * synchronization: flush (default: MPI_Win_flush after each get, within one
 * MPI_Win_lock(SHARED)/unlock), flush_local, lock (lock SHARED, get, unlock each time),
 * lock_all, fence (rank 0 fence-get-fence-fence, rank 1 fence-fence-get-fence) or pscw (rank 0
 * start-get-complete-post-wait, rank 1 post-wait-start-get-complete). Reported as rank 0's
 * time between the first timed and the last operation / -i, in microseconds (fence and pscw:
 * half of it, both ranks having got). Options: -w -s -h -v -m [MIN:]MAX -x ITER -i ITER
 * -M BYTES (not OSU's: buffer limit per rank).
 */
#define TITLE "OSU MPI_Get latency Test"
#define NAME "osu_get_latency"
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
    rma_latency_sizes(rank, get, 0, T_CHAR, MPI_LOCK_SHARED, MPI_LOCK_SHARED);
    rma_end();
    return EXIT_SUCCESS;
}
