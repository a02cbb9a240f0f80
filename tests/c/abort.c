/*
 * MPI_Abort: rank 1 stops the job with an error code (7, or the first argument) while rank 0
 * waits for a message that never comes; the launcher must end the whole job and exit with that
 * code, 0 included. Run with 2 ranks (tests/tests/abi.rs checks the exit code on MPICH and on
 * Kestrel).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, x;
    int code = argc > 1 ? atoi(argv[1]) : 7;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        printf("aborting\n");
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank 0 must not get here\n");
    MPI_Finalize();
    return 1;
}
