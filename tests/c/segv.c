/*
 * A real crash: rank 1 writes through a null pointer after MPI_Init (or, with the argument
 * `early`, before it, when only the launcher's environment can keep the handlers of libraries
 * loaded with libfabric out of the way). The launcher must report
 * it as killed by SIGSEGV (exit 128+11), not as a normal exit, and no library loaded behind
 * the network transport may turn it into its own backtrace, exit status or `.btr` file
 * (tests/tests/abi.rs runs it with the network transport forced on).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank;
    const char *pmi_rank = getenv("PMI_RANK");
    if (argc > 1 && strcmp(argv[1], "early") == 0 && pmi_rank && strcmp(pmi_rank, "1") == 0) {
        volatile int *nowhere = NULL;
        *nowhere = 1;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        volatile int *nowhere = NULL;
        *nowhere = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d must not get here\n", rank);
    MPI_Finalize();
    return 1;
}
