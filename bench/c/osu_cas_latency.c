/*
 * osu_cas_latency for Open MPI and MPICH (and Kestrel): OSU Micro-Benchmarks 7.4's
 * osu_cas_latency (methodology, options and output), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_cas_latency osu_cas_latency.c (osu_rma.h and
 * osu_opts.h beside it). Run with exactly 2 ranks.
 *
 * Rank 0 is the origin, rank 1 the target. For each -T datatype (default MPI_CHAR, as OSU 7.4;
 * mpi_int, all (those two: MPI_Compare_and_swap takes no floating-point type, so OSU's
 * mpi_float is refused) and mpi_long_long, the 8-byte operation of OSU before 7.x, which is not
 * an OSU 7.4 choice) a header and one line: a window of the -m maximum bytes per rank
 * (default 4 MiB, as OSU; -w: MPI_Win_allocate by default, or MPI_Win_create, or
 * MPI_Win_create_dynamic with the target's address exchanged), then -x untimed warm-up
 * (default 100) and -i timed (default 10000) MPI_Compare_and_swap of one element on
 * displacement 0 of rank 1's window, each completed by the -s synchronization: flush (default:
 * MPI_Win_flush after each, within one MPI_Win_lock(SHARED)/unlock), flush_local, lock
 * (MPI_Win_lock(EXCLUSIVE), compare_and_swap, unlock each time), lock_all, fence (rank 0
 * fence-op-fence-fence, rank 1 fence-fence-op-fence) or pscw (rank 0
 * start-op-complete-post-wait, rank 1 post-wait-start-op-complete). Reported, against the
 * element's size in bytes, as rank 0's time between the first timed and the last operation /
 * -i, in microseconds (fence and pscw: half of it, both ranks having operated). Options: -w -s
 * -h -v -m [MIN:]MAX -x ITER -i ITER -T TYPE -M BYTES (not OSU's: buffer limit per rank).
 */
#define TITLE "OSU MPI_Compare_and_swap latency Test"
#define NAME "osu_cas_latency"
#define RMA_TYPES
#define RMA_NO_FLOAT
#include "osu_rma.h"

static void cas(struct rma *r, int target, size_t offset)
{
    MPI_Compare_and_swap(r->buf + offset, r->cmp + offset, r->res + offset, r->type, target,
                         r->disp + (MPI_Aint)offset, r->win);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = rma_begin(argc, argv, &rank, &nprocs);
    if (status >= 0)
        return status;
    rma_limit_to_memory(rank, 4);
    for (int t = 0; t < ntypes; t++) {
        int elem;
        struct rma r;
        MPI_Type_size(mpi_type(types[t]), &elem);
        rma_header(rank, type_names[types[t]]);
        rma_open(&r, rank, max_size > (size_t)elem ? max_size : (size_t)elem, 2);
        r.size = (size_t)elem;
        r.count = 1;
        r.type = mpi_type(types[t]);
        double lat = rma_latency(&r, cas, rma_iterations(r.size), rma_warmup(r.size),
                                 MPI_LOCK_EXCLUSIVE, MPI_LOCK_SHARED);
        if (rank == 0) {
            printf("%-10d%18.2f\n", elem, lat);
            fflush(stdout);
        }
        rma_close(&r);
    }
    rma_end();
    return EXIT_SUCCESS;
}
