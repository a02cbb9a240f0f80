/*
 * Short-lived communicators: the time to split MPI_COMM_WORLD in two halves, run one 8-byte
 * MPI_Allreduce on the half and free it, per iteration (the pattern of libraries that make a
 * sub-communicator for one step, and of mpi4py's test suite). A library that sets up
 * per-communicator state on the first collective pays it on every iteration here.
 *
 *   comm_split [-i ITERATIONS] [-x WARMUP]    (other OSU options are accepted and ignored)
 *
 * Output: a '#' header, then one row "<collectives per communicator> <us per iteration>".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int iters = 1000, warmup = 10;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "-i") == 0)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "-x") == 0)
            warmup = atoi(argv[++i]);
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double t0 = 0;
    for (int i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        double x = rank, sum = 0;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, half);
        MPI_Comm_free(&half);
    }
    double per = (MPI_Wtime() - t0) / (iters > 0 ? iters : 1) * 1e6;
    if (rank == 0) {
        printf("# comm_split: MPI_Comm_split + one 8-byte MPI_Allreduce + MPI_Comm_free, %d ranks\n", size);
        printf("# %-10s %20s\n", "Allreduces", "Time per split (us)");
        printf("%-12d %20.2f\n", 1, per);
    }
    MPI_Finalize();
    return 0;
}
