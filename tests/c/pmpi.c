/*
 * The profiling interface: this program defines MPI_Send and MPI_Allreduce itself, counts
 * the calls and forwards them to PMPI_Send and PMPI_Allreduce, as a profiling tool does.
 * The library's own MPI_Send is never reached, yet the messages arrive. Needs at least 2
 * ranks.
 */
#include "check.h"

static int sends, allreduces;

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
             MPI_Comm comm)
{
    sends++;
    return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm)
{
    allreduces++;
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int main(int argc, char **argv)
{
    int size;
    test_start(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks");
    int v = check_rank, got = -1;
    if (check_rank == 0) {
        OK(MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD));
        OK(MPI_Send(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD));
        CHECK(sends == 2, "the profiling MPI_Send saw %d calls", sends);
    } else if (check_rank == 1) {
        OK(MPI_Recv(&got, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Recv(&got, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == 0, "received %d", got);
    }
    int sum = 0;
    OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(allreduces == 1 && sum == size * (size - 1) / 2, "allreduce %d, seen %d", sum,
          allreduces);
    test_pass("pmpi");
    return 0;
}
