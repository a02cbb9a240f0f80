/*
 * MPI_Abort: rank 1 stops the job with error code 7 while rank 0 waits for a message that
 * never comes; the launcher must end the whole job and exit with 7. Run with 2 ranks
 * (tests/tests/abi.rs checks the exit code on MPICH and on Kestrel).
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, x;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        printf("aborting\n");
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 7);
    }
    MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank 0 must not get here\n");
    MPI_Finalize();
    return 1;
}
