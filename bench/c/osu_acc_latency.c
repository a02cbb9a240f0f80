/*
 * osu_acc_latency for Open MPI and MPICH (and Kestrel): OSU Micro-Benchmarks 7.4's
 * osu_acc_latency (methodology, options and output), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_acc_latency osu_acc_latency.c (osu_rma.h and
 * osu_opts.h beside it). Run with exactly 2 ranks.
 *
 * Rank 0 is the origin, rank 1 the target. For each -T datatype (default MPI_CHAR, as OSU 7.4;
 * mpi_int, mpi_float, all, and mpi_long_long, which is not OSU's) a header, then per size
 * (1 B .. 4 MiB in powers of two; sizes smaller than one element skipped) a new window of
 * `size` bytes per rank (-w: MPI_Win_allocate by default, or MPI_Win_create, or
 * MPI_Win_create_dynamic with the target's address exchanged), then -x untimed warm-up
 * (default 100, 10 above 8 KiB) and -i timed (default 10000, 1000 above 8 KiB)
 * MPI_Accumulate(MPI_SUM) of size / sizeof(type) elements to displacement 0 of rank 1's window,
 * each completed by the -s synchronization: flush (default: MPI_Win_flush after each, within
 * one MPI_Win_lock(SHARED)/unlock), flush_local, lock (lock SHARED, accumulate, unlock each
 * time), lock_all, fence (rank 0 fence-acc-fence-fence, rank 1 fence-fence-acc-fence) or pscw
 * (rank 0 start-acc-complete-post-wait, rank 1 post-wait-start-acc-complete). Reported as rank
 * 0's time between the first timed and the last operation / -i, in microseconds (fence and
 * pscw: half of it, both ranks having accumulated). Options: -w -s -h -v -m [MIN:]MAX -x ITER
 * -i ITER -T TYPE -M BYTES (not OSU's: buffer limit per rank).
 */
#define TITLE "OSU MPI_Accumulate latency Test"
#define NAME "osu_acc_latency"
#define RMA_TYPES
#include "osu_rma.h"

static void acc(struct rma *r, int target, size_t offset)
{
    MPI_Accumulate(r->buf + offset, r->count, r->type, target, r->disp + (MPI_Aint)offset,
                   r->count, r->type, MPI_SUM, r->win);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = rma_begin(argc, argv, &rank, &nprocs);
    if (status >= 0)
        return status;
    rma_limit_to_memory(rank, 2);
    for (int t = 0; t < ntypes; t++) {
        rma_header(rank, type_names[types[t]]);
        rma_latency_sizes(rank, acc, 0, types[t], MPI_LOCK_SHARED, MPI_LOCK_SHARED);
    }
    rma_end();
    return EXIT_SUCCESS;
}
