/*
 * osu_get_acc_latency for Open MPI and MPICH (and Kestrel): OSU Micro-Benchmarks 7.4's
 * osu_get_acc_latency (methodology, options and output: its own defaults MPI_Win_create and
 * lock, and no "# Datatype" line, as OSU), written for the comparisons in bench/compare.
 * Build: mpicc -O2 -o osu_get_acc_latency osu_get_acc_latency.c (osu_rma.h and osu_opts.h
 * beside it). Run with exactly 2 ranks.
 *
 * Rank 0 is the origin, rank 1 the target. Per size (1 B .. 4 MiB in powers of two), a new
 * window of `size` bytes per rank (-w: MPI_Win_create by default, or MPI_Win_allocate, or
 * MPI_Win_create_dynamic with the target's address exchanged), then -x untimed warm-up
 * (default 100, 10 above 8 KiB) and -i timed (default 10000, 1000 above 8 KiB)
 * MPI_Get_accumulate(MPI_SUM) of `size` MPI_CHAR to displacement 0 of rank 1's window (the old
 * contents into a result buffer), each completed by the -s synchronization: lock (default:
 * MPI_Win_lock(EXCLUSIVE), get_accumulate, unlock each time), flush (MPI_Win_flush after each,
 * within one lock EXCLUSIVE/unlock), flush_local, lock_all, fence (rank 0
 * fence-op-fence-fence, rank 1 fence-fence-op-fence) or pscw (rank 0
 * start-op-complete-post-wait, rank 1 post-wait-start-op-complete). Reported as rank 0's time
 * between the first timed and the last operation / -i, in microseconds (fence and pscw: half
 * of it, both ranks having operated). Options: -w -s -h -v -m [MIN:]MAX -x ITER -i ITER
 * -M BYTES (not OSU's: buffer limit per rank).
 */
#define TITLE "OSU MPI_Get_accumulate latency Test"
#define NAME "osu_get_acc_latency"
#define RMA_WIN_DEFAULT WIN_CREATE
#define RMA_SYNC_DEFAULT SYNC_LOCK
#define RMA_GET_ACC_HELP
#include "osu_rma.h"

static void get_acc(struct rma *r, int target, size_t offset)
{
    MPI_Get_accumulate(r->buf + offset, (int)r->size, MPI_CHAR, r->res + offset, (int)r->size,
                       MPI_CHAR, target, r->disp + (MPI_Aint)offset, (int)r->size, MPI_CHAR,
                       MPI_SUM, r->win);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = rma_begin(argc, argv, &rank, &nprocs);
    if (status >= 0)
        return status;
    rma_limit_to_memory(rank, 3);
    rma_header(rank, NULL);
    rma_latency_sizes(rank, get_acc, 1, T_CHAR, MPI_LOCK_EXCLUSIVE, MPI_LOCK_EXCLUSIVE);
    rma_end();
    return EXIT_SUCCESS;
}
