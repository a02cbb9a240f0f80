/*
 * Shared by the collective C benchmarks (osu_allgather.c ... osu_scatter.c): options, help,
 * start-up, buffers and the OSU 7.4 report line, so that each benchmark file holds only its
 * loop. The including file defines TITLE (the benchmark's title line) and NAME (its program
 * name) first. osu_nbc.h includes it for the nonblocking ones with OSU_NBC defined (the help
 * lists -t, and the blocking report line is left out) and, for osu_ibarrier, NO_SIZES (the
 * help omits -m and -M, as osu_barrier.c's does).
 */
#ifndef KESTREL_OSU_COLL_H
#define KESTREL_OSU_COLL_H

#if !defined(TITLE) || !defined(NAME)
#error "define TITLE and NAME before including osu_coll.h"
#endif

#include "osu_opts.h"

static void help(void)
{
    printf("Usage: %s [options]\nOptions:\n", NAME);
    printf("  -h, --help                print this help\n");
    printf("  -v, --version             print version info\n");
    printf("  -f, --full                print full format listing (MIN/MAX latency and ITERATIONS\n");
    printf("%28sdisplayed in addition to AVERAGE latency)\n", "");
#ifndef NO_SIZES
    printf("  -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n");
    printf("%28sbytes respectively. Examples:\n", "");
    printf("%28s-m 128      // min = default, max = 128\n", "");
    printf("%28s-m 2:128    // min = 2, max = 128\n", "");
    printf("%28s-m 2:       // min = 2, max = default\n", "");
#endif
    printf("  -i, --iterations          ITER - set iterations per message size to ITER (default 1000 for small\n");
    printf("%28smessages, 100 for large messages)\n", "");
    printf("  -x, --warmup              ITER - set number of warmup\n");
    printf("%28siterations to skip before timing (default 200)\n", "");
#ifndef NO_SIZES
    printf("  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n");
    printf("%28s(default 536870912)\n", "");
#endif
#ifdef OSU_NBC
    printf("  -t, --num-test-calls      Non-blocking collectives-> CALLS - set the number of MPI_Test() "
           "calls during the dummy computation,\n");
    printf("%28sset CALLS to 100, 1000, or any number > 0.\n", "");
    printf("%28sMulti-Threaded/Process-> SEND:[RECV] - set the sender and receiver number of "
           "threads/processes(t/p)\n", "");
    printf("%28smin: 1 default: (receiver t/p: 2 sender t/p: 1), max: 128.\n", "");
    printf("%28sExamples:\n", "");
    printf("%28s-t 4        // receiver t/p = 4 and sender t/p = 1\n", "");
    printf("%28s-t 4:6      // sender t/p = 4 and receiver t/p = 6\n", "");
    printf("%28s-t 2:       // not defined\n", "");
#endif
}

#ifndef NO_SIZES
/* -M: the largest size whose buffers (BLOCKS bytes per message byte) fit in the limit. */
static void limit_to_memory(int rank, size_t blocks)
{
    if (blocks == 0)
        return;
    size_t fits = (size_t)mem_limit / blocks;
    if (max_size > fits) {
        max_size = fits;
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }
}

static char *alloc_buffer(int rank, size_t bytes, int fill)
{
    char *p = NULL;
    if (posix_memalign((void **)&p, 4096, bytes + 1)) {
        fprintf(stderr, "rank %d: cannot allocate buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, fill, bytes + 1);
    return p;
}
#endif /* NO_SIZES */

#ifndef OSU_NBC
/* OSU's statistics: MIN, MAX and SUM of the ranks' mean latencies reduced to rank 0, which
 * prints the average (and with -f the minimum, maximum and timed iterations). */
static void report(int rank, int nprocs, size_t size, double latency, long iters)
{
    double min_time = 0.0, max_time = 0.0, avg_time = 0.0;
    MPI_Reduce(&latency, &min_time, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency, &max_time, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency, &avg_time, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    avg_time /= nprocs;
    if (rank != 0)
        return;
    printf("%-10zu%18.2f", size, avg_time);
    if (full)
        printf("%18.2f%18.2f%12ld", min_time, max_time, iters);
    printf("\n");
    fflush(stdout);
}
#endif /* OSU_NBC */

#endif /* KESTREL_OSU_COLL_H */
