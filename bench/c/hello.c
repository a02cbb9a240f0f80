/*
 * MPI hello, the C counterpart of Kestrel's examples/hello.rs: the startup
 * benchmark (bench/src/bin/startup.rs) builds it with mpicc.openmpi and
 * mpicc.mpich so that all three launchers run the same work per rank.
 *
 * Each rank prints "Hello from rank R of N on NODE" and exits; nothing else
 * is printed on stdout, because the benchmark counts those lines.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank = 0;
    int size = 0;
    int len = 0;
    char node[MPI_MAX_PROCESSOR_NAME];

    /* The default error handler (MPI_ERRORS_ARE_FATAL) aborts on failure,
     * so the return codes need no checks here. */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(node, &len);

    printf("Hello from rank %d of %d on %s\n", rank, size, node);
    /* Flush before MPI_Finalize so the line is not lost if the launcher
     * tears the job down right after the last rank finalizes. */
    fflush(stdout);

    MPI_Finalize();
    return 0;
}
