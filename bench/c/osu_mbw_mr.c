/*
 * osu_mbw_mr for Kestrel's MPICH-ABI library, Open MPI and MPICH: the same methodology,
 * options and output as Kestrel's bench/src/bin/osu_mbw_mr.rs (OSU Micro-Benchmarks v7.4
 * style), for the comparisons in bench/compare. Build: mpicc -O2 -o osu_mbw_mr osu_mbw_mr.c
 *
 * With P pairs (-p, default ranks / 2), rank i < P sends to rank i + P. Per iteration every
 * rank enters a barrier (not timed); then each sender starts a window of -W (default 64)
 * MPI_Isend of `size` bytes (tag 100), waits for them and receives a 4-byte acknowledgement
 * (tag 101), while each receiver posts the window's MPI_Irecv (each into its own buffer),
 * waits, and sends the acknowledgement. Ranks beyond 2 P only take part in the barriers. -x
 * warm-up iterations (default 10, 2 above 8 KiB) are not timed; rank 0 times each of the -i
 * iterations (default 100, 20 above 8 KiB) and reports the aggregate bandwidth
 * P * size * W * iterations / time in MB/s (10^6 bytes) and the message rate
 * 10^6 * bandwidth / size in messages/s (-R 0 drops that column). Sizes 1 B .. 4 MiB.
 */
#define TITLE "OSU MPI Multiple Bandwidth / Message Rate Test"
#define NAME "osu_mbw_mr"
#define OSU_MBW 1
#include "osu_bw.h"

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "W", AT_LEAST_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    long half = nprocs / 2, p = pairs ? pairs : half;
    if (p > half) {
        if (rank == 0) {
            fprintf(stderr, "Invalid Number of Pairs [-p %ld]\n\n", p);
            help();
        }
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    if (max_size > (size_t)mem_limit / (size_t)(window + 1)) {
        max_size = (size_t)mem_limit / (size_t)(window + 1);
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }
    int sender = rank < p, receiver = !sender && rank < 2 * p;
    int peer = sender ? rank + (int)p : rank - (int)p;
    size_t s_len = max_size < 4 ? 4 : max_size;
    size_t r_len = receiver ? max_size * (size_t)window : 4;
    if (r_len < 4)
        r_len = 4;
    char *s_buf = NULL, *r_buf = NULL;
    MPI_Request *reqs = malloc((size_t)window * sizeof *reqs);
    MPI_Status *stats = malloc((size_t)window * sizeof *stats);
    if (!reqs || !stats || posix_memalign((void **)&s_buf, 4096, s_len) ||
        posix_memalign((void **)&r_buf, 4096, r_len)) {
        fprintf(stderr, "rank %d: cannot allocate buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        printf("\n# %s v%s\n# [ pairs: %ld ] [ window size: %ld ]\n# Datatype: MPI_CHAR.\n",
               TITLE, VERSION, p, window);
        if (print_rate)
            printf("%-10s%18s%18s\n", "# Size", "MB/s", "Messages/s");
        else
            printf("%-10s%18s\n", "# Size", "MB/s");
        fflush(stdout);
    }
    for (size_t size = min_size; size <= max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        memset(s_buf, 'a', sender ? size : 4);
        memset(r_buf, 'b', receiver ? size * (size_t)window : 4);
        MPI_Barrier(MPI_COMM_WORLD);
        double t = 0.0;
        for (long i = 0; i < iters + warm; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (sender) {
                double t_start = MPI_Wtime();
                for (long k = 0; k < window; k++)
                    MPI_Isend(s_buf, (int)size, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &reqs[k]);
                MPI_Waitall((int)window, reqs, stats);
                MPI_Recv(r_buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= warm)
                    t += MPI_Wtime() - t_start;
            } else if (receiver) {
                for (long k = 0; k < window; k++)
                    MPI_Irecv(r_buf + (size_t)k * size, (int)size, MPI_CHAR, peer, 100,
                              MPI_COMM_WORLD, &reqs[k]);
                MPI_Waitall((int)window, reqs, stats);
                MPI_Send(s_buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            double bw = (double)size * (double)p * (double)iters * (double)window / 1e6 / t;
            if (print_rate)
                printf("%-10zu%18.2f%18.2f\n", size, bw, 1e6 * bw / (double)size);
            else
                printf("%-10zu%18.2f\n", size, bw);
            fflush(stdout);
        }
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
    free(s_buf);
    free(r_buf);
    free(reqs);
    free(stats);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
