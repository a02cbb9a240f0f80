/*
 * A rank killed in the middle of a one-sided epoch (tests/tests/abi.rs runs it on Kestrel and
 * checks that the job stops, within its deadline, with nothing left behind). Not a PASS test:
 * the job is meant to fail.
 *
 *   rma_killed lock   rank 1 holds rank 0's exclusive lock (a window of MPI_Win_allocate, so
 *                     on one node the lock is a word in shared memory) when it dies; the
 *                     others wait for that lock.
 *   rma_killed fence  rank 1 dies after its puts, before the closing fence the others wait
 *                     in (a window of MPI_Win_create: active messages).
 *
 * Rank 0 prints "JOB=<Kestrel job id>" first, and every rank "EPOCH rank <r>" once it is in
 * the epoch, so the test knows the death came mid-epoch.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "lock";
    if (rank == 0) {
        const char *job = getenv("KESTREL_JOB_ID");
        printf("JOB=%s\n", job ? job : "");
        fflush(stdout);
    }
    long value = rank;
    MPI_Win win;
    long *base = NULL;
    long local[4] = {0};
    if (strcmp(mode, "lock") == 0) {
        MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                         &win);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
            MPI_Put(&value, 1, MPI_LONG, 0, 1, 1, MPI_LONG, win);
            MPI_Win_flush(0, win);
            printf("EPOCH rank %d\n", rank);
            fflush(stdout);
            MPI_Barrier(MPI_COMM_WORLD);
            raise(SIGKILL);
        }
        printf("EPOCH rank %d\n", rank);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        /* Rank 1 holds it and is gone: this waits until the job is stopped. */
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Win_unlock(0, win);
    } else {
        MPI_Win_create(local, sizeof local, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_fence(0, win);
        MPI_Put(&value, 1, MPI_LONG, (rank + 1) % size, rank % 4, 1, MPI_LONG, win);
        printf("EPOCH rank %d\n", rank);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            usleep(100 * 1000);
            raise(SIGKILL);
        }
        MPI_Win_fence(0, win);
    }
    MPI_Win_free(&win);
    printf("rank %d finished: the job was not stopped\n", rank);
    MPI_Finalize();
    return 0;
}
