/*
 * osu_latency_mt: the multithreaded ping-pong (OSU Micro-Benchmarks v7.4 style) under
 * MPI_THREAD_MULTIPLE, for Kestrel's MPICH-ABI library, Open MPI and MPICH in bench/compare.
 * Build: mpicc -O2 -o osu_latency_mt osu_latency_mt.c
 *
 * Rank 0 runs SENDERS threads, rank 1 RECEIVERS threads (-t SENDERS:RECEIVERS; -t N sets
 * the receivers with one sender, OSU's default is 1:2). Per size: a barrier, then every sender thread does -x
 * untimed and -i timed round trips (MPI_Send tag 1, MPI_Recv tag 2), and the receiver
 * threads share the matching MPI_Recv tag 1 / MPI_Send tag 2 between them (each takes an
 * equal part of the senders' total). Which receiver thread answers which sender thread is
 * the library's matching; the latency is half of a sender thread's average round trip,
 * averaged over the sender threads, in microseconds. Options as osu_latency, plus -t.
 */
#define TITLE "OSU MPI Multi-threaded Latency Test"
#define NAME "osu_latency_mt"
#define OSU_THREADS 1
#define OSU_MIN_SIZE 0
#define OSU_MAX_SIZE (1 << 22)
#define OSU_ITERATIONS 10000
#define OSU_ITERATIONS_LARGE 1000
#define OSU_SKIP 100
#define OSU_SKIP_LARGE 10
#include "osu_opts.h"

#include <pthread.h>

static void help(void)
{
    printf("Usage: %s [options]\nOptions:\n", NAME);
    printf("  -h, --help                print this help\n");
    printf("  -v, --version             print version info\n");
    printf("  -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n");
    printf("%28sbytes respectively. Examples:\n", "");
    printf("%28s-m 128      // min = default, max = 128\n", "");
    printf("%28s-m 2:128    // min = 2, max = 128\n", "");
    printf("%28s-m 2:       // min = 2, max = default\n", "");
    printf("  -x, --warmup              ITER - set number of warmup\n");
    printf("%28siterations to skip before timing (default 100)\n", "");
    printf("  -i, --iterations          ITER - number of iterations for timing (default 10000)\n");
    printf("  -t, --num_threads         SEND:[RECV] - set the sender and receiver number of threads\n");
    printf("%28smin: 1 default: (receiver threads: 2 sender threads: 1), max: 128.\n", "");
    printf("%28sExamples:\n", "");
    printf("%28s-t 4        // receiver threads = 4 and sender threads = 1\n", "");
    printf("%28s-t 4:6      // sender threads = 4 and receiver threads = 6\n", "");
    printf("  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n");
    printf("%28s(default 536870912)\n", "");
}

struct job {
    int rank;
    size_t size;
    long iters, warm, share; /* share: round trips a receiver thread answers */
    double seconds;          /* a sender thread's timed round trips */
    char *s_buf, *r_buf;
};

static pthread_barrier_t start_line;

static void *sender(void *arg)
{
    struct job *j = arg;
    pthread_barrier_wait(&start_line);
    double t_start = 0.0;
    for (long i = 0; i < j->iters + j->warm; i++) {
        if (i == j->warm)
            t_start = MPI_Wtime();
        MPI_Send(j->s_buf, (int)j->size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(j->r_buf, (int)j->size, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    j->seconds = MPI_Wtime() - t_start;
    return NULL;
}

static void *receiver(void *arg)
{
    struct job *j = arg;
    pthread_barrier_wait(&start_line);
    for (long i = 0; i < j->share; i++) {
        MPI_Recv(j->r_buf, (int)j->size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(j->s_buf, (int)j->size, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int status = begin(argc, argv, "t", EXACTLY_TWO, &rank, &nprocs);
    if (status >= 0)
        return status;
    long nthreads = rank == 0 ? threads_sender : threads_receiver;
    if (max_size > (size_t)mem_limit / (2 * (size_t)nthreads)) {
        max_size = (size_t)mem_limit / (2 * (size_t)nthreads);
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }
    struct job *jobs = calloc((size_t)nthreads, sizeof *jobs);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    for (long t = 0; t < nthreads; t++) {
        if (posix_memalign((void **)&jobs[t].s_buf, 4096, max_size + 1) ||
            posix_memalign((void **)&jobs[t].r_buf, 4096, max_size + 1)) {
            fprintf(stderr, "rank %d: cannot allocate buffers\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0) {
        printf("\n# %s v%s\n# Number of Sender threads: %ld\n# Number of Receiver threads: %ld\n"
               "# Datatype: MPI_CHAR.\n%-10s%18s\n",
               TITLE, VERSION, threads_sender, threads_receiver, "# Size", "Avg Latency(us)");
        fflush(stdout);
    }
    pthread_barrier_init(&start_line, NULL, (unsigned)nthreads);
    for (size_t size = min_size; size <= max_size; size = size ? size * 2 : 1) {
        if (size == 0)
            continue;
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        long total = threads_sender * (iters + warm);
        for (long t = 0; t < nthreads; t++) {
            struct job *j = &jobs[t];
            j->rank = rank;
            j->size = size;
            j->iters = iters;
            j->warm = warm;
            j->share = total / threads_receiver + (t < total % threads_receiver);
            memset(j->s_buf, 'a', size);
            memset(j->r_buf, 'b', size);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (long t = 0; t < nthreads; t++)
            pthread_create(&th[t], NULL, rank == 0 ? sender : receiver, &jobs[t]);
        for (long t = 0; t < nthreads; t++)
            pthread_join(th[t], NULL);
        if (rank == 0) {
            double sum = 0.0;
            for (long t = 0; t < nthreads; t++)
                sum += jobs[t].seconds * 1e6 / (2.0 * iters);
            printf("%-10zu%18.2f\n", size, sum / (double)nthreads);
            fflush(stdout);
        }
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
    pthread_barrier_destroy(&start_line);
    for (long t = 0; t < nthreads; t++) {
        free(jobs[t].s_buf);
        free(jobs[t].r_buf);
    }
    free(jobs);
    free(th);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
