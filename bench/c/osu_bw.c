/*
 * osu_bw for Open MPI and MPICH: the same methodology, options and output as Kestrel's
 * bench/src/bin/osu_bw.rs (OSU Micro-Benchmarks v7.4 style), written for the comparisons in
 * bench/compare. Build: mpicc -O2 -o osu_bw osu_bw.c
 *
 * Per iteration rank 0 starts -W (default 64) MPI_Isend of `size` bytes (tag 100), waits for
 * all, then receives a 4-byte acknowledgement (tag 101); rank 1 posts -W MPI_Irecv, each into
 * its own buffer, waits for all and sends the acknowledgement. Per size: a barrier, -x
 * untimed warm-up iterations (default 10, 2 above 8 KiB), then -i iterations (default 100, 20
 * above 8 KiB) each timed on rank 0 with MPI_Wtime; reported as size * W * iterations / time
 * in MB/s (10^6 bytes). Sizes 1 B .. 4 MiB in powers of two. Options: -h -v -m [MIN:]MAX
 * -x ITER -i ITER -W SIZE -M BYTES (buffer limit per rank).
 */
#define TITLE "OSU MPI Bandwidth Test"
#define NAME "osu_bw"
#include "osu_bw.h"

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "W", EXACTLY_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    /* Per rank: a send buffer and one receive buffer per message of a window. */
    if (max_size > (size_t)mem_limit / (size_t)(window + 1)) {
        max_size = (size_t)mem_limit / (size_t)(window + 1);
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }

    char *s_buf = NULL, *r_buf = NULL;
    size_t s_len = max_size < 4 ? 4 : max_size;
    size_t r_len = (rank == 1) ? max_size * (size_t)window : 0;
    if (r_len < 4)
        r_len = 4;
    MPI_Request *reqs = malloc(2 * (size_t)window * sizeof *reqs);
    MPI_Status *stats = malloc((size_t)window * sizeof *stats);
    if (!reqs || !stats || posix_memalign((void **)&s_buf, 4096, s_len) ||
        posix_memalign((void **)&r_buf, 4096, r_len)) {
        fprintf(stderr, "rank %d: cannot allocate buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        printf("\n# %s v%s\n# Datatype: MPI_CHAR.\n%-10s%18s\n", TITLE, VERSION, "# Size",
               "Bandwidth (MB/s)");
        fflush(stdout);
    }

    int peer = 1 - rank;
    for (size_t size = min_size; size <= max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        memset(s_buf, 'a', size);
        memset(r_buf, 'b', (rank == 1) ? size * (size_t)window : 4);
        MPI_Barrier(MPI_COMM_WORLD);
        double t_total = 0.0;
        for (long i = 0; i < iters + warm; i++) {
            if (rank == 0) {
                double t_start = MPI_Wtime();
                for (long j = 0; j < window; j++)
                    MPI_Isend(s_buf, (int)size, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall((int)window, reqs, stats);
                MPI_Recv(r_buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= warm)
                    t_total += MPI_Wtime() - t_start;
            } else {
                for (long j = 0; j < window; j++)
                    MPI_Irecv(r_buf + (size_t)j * size, (int)size, MPI_CHAR, peer, 100,
                              MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall((int)window, reqs, stats);
                MPI_Send(s_buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            double bytes = (double)size / 1e6 * (double)iters * (double)window * 1.0;
            printf("%-10zu%18.2f\n", size, bytes / t_total);
            fflush(stdout);
        }
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
    free(reqs);
    free(stats);
    free(s_buf);
    free(r_buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
