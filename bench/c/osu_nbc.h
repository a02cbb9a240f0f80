/*
 * Shared by the nonblocking collective C benchmarks (osu_iallgather.c ... osu_iscatter.c):
 * OSU 7.4's overlap method, the same as Kestrel's bench/src/osu/nbc.rs, so that each benchmark
 * file holds only its buffers and the call that starts its collective. The including file
 * defines TITLE and NAME (and NO_SIZES for osu_ibarrier), starts with
 * begin(argc, argv, "ft", ...) and calls nbc_run() with a function that starts its collective.
 *
 * Per size (osu_ibarrier: once, with the large counts -i 100 -x 10 by default), after a barrier:
 *   1. pure communication: -x + -i times { t0; start; MPI_Wait; t1; MPI_Barrier (not in
 *      osu_ibarrier) }, the mean of the timed t1 - t0 being the rank's pure latency;
 *   2. MPI_Barrier; the compute target is set to that latency; MPI_Barrier;
 *   3. overlap: -x + -i times { t0; start (init, timed); dummy_compute (timed; -t N splits it
 *      in N parts each followed by a timed MPI_Test); MPI_Wait (timed); t1; MPI_Barrier };
 *   4. MPI_Barrier; OSU's calculate_and_print_stats: SUM reductions to rank 0 of the
 *      per-iteration means (test, pure latency, overall, compute, wait, init), MIN and MAX of
 *      the pure latency, MPI_Barrier; rank 0 prints the averages over the ranks: overall,
 *      compute - test, pure latency and overlap = MAX(0, 100 - (overall - (compute - test))
 *      / pure * 100) (with -f also init, test, wait and the pure latency's min and max).
 */
#ifndef KESTREL_OSU_NBC_H
#define KESTREL_OSU_NBC_H

#define OSU_NBC 1
#include "osu_coll.h"

/* OSU's dummy computation: compute_on_host on a DIM x DIM float matrix. The arrays have
 * external linkage so that the compiler keeps the computation. */
#define DIM 25
float nbc_a[DIM][DIM], nbc_x[DIM], nbc_y[DIM];

/* As OSU's allocate_host_arrays sets them. */
static void init_host_arrays(void)
{
    for (int i = 0; i < DIM; i++) {
        nbc_x[i] = nbc_y[i] = 1.0f;
        for (int j = 0; j < DIM; j++)
            nbc_a[i][j] = 2.0f;
    }
}

static void compute_on_host(void)
{
    for (int i = 0; i < DIM; i++)
        for (int j = 0; j < DIM; j++)
            nbc_x[i] = nbc_x[i] + nbc_a[i][j] * nbc_a[j][i] + nbc_y[j];
}

/* OSU's do_compute_cpu: kernels, each timed, until their summed time reaches the target. */
static void do_compute_cpu(double target_seconds)
{
    double time_elapsed = 0.0;
    while (time_elapsed < target_seconds) {
        double t1 = MPI_Wtime();
        compute_on_host();
        double t2 = MPI_Wtime();
        time_elapsed += t2 - t1;
    }
}

/* OSU's dummy_compute (do_compute_and_probe on the CPU): returns the time spent in MPI_Test. */
static double dummy_compute(double seconds, MPI_Request *request)
{
    double test_time = 0.0;
    if (num_probes == 0) {
        do_compute_cpu(seconds);
        return test_time;
    }
    double part = seconds / num_probes;
    for (long n = 0; n < num_probes; n++) {
        int flag = 0;
        do_compute_cpu(part);
        double t1 = MPI_Wtime();
        MPI_Test(request, &flag, MPI_STATUS_IGNORE);
        double t2 = MPI_Wtime();
        test_time += t2 - t1;
    }
    return test_time;
}

/* How the root moves: rank 0 always (igather, iscatter and the rootless ones), every
 * iteration in both loops (ireduce), or in the pure-communication loop only (ibcast, as OSU
 * 7.4's osu_ibcast.c). */
enum { ROOT_FIXED, ROOT_ROTATE, ROOT_ROTATE_PURE };

/* Starts the collective on SIZE bytes per rank and block, from or to ROOT. */
typedef void (*start_fn)(size_t size, int root, MPI_Request *request);

static void nbc_print_header(int rank)
{
    if (rank != 0)
        return;
    printf("\n# %s v%s\n", TITLE, VERSION);
    printf("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n");
#ifdef NO_SIZES
    printf("# Overall(us)");
#else
    printf("# Datatype: MPI_CHAR.\n%-10s%18s", "# Size", "Overall(us)");
#endif
    if (full)
        printf("%18s%18s%18s%18s%18s%18s%18s%18s", "Compute(us)", "Coll. Init(us)", "MPI_Test(us)",
               "MPI_Wait(us)", "Pure Comm.(us)", "Min Comm.(us)", "Max Comm.(us)", "Overlap(%)");
    else
        printf("%18s%18s%18s", "Compute(us)", "Pure Comm.(us)", "Overlap(%)");
    printf("\n");
    fflush(stdout);
}

/* OSU's calculate_and_print_stats and print_stats_nbc. The times are sums over ITERS timed
 * iterations in seconds, LATENCY the pure latency in microseconds. */
static void nbc_report(int rank, int nprocs, size_t size, double timer, double latency,
                       double test_time, double cpu_time, double wait_time, double init_time,
                       long iters)
{
    double test_total = test_time * 1e6 / iters, tcomp_total = cpu_time * 1e6 / iters;
    double overall_time = timer * 1e6 / iters, wait_total = wait_time * 1e6 / iters;
    double init_total = init_time * 1e6 / iters, avg_comm_time = latency;
    double min_comm_time = latency, max_comm_time = latency;
    if (rank != 0) {
        double ignored[8]; /* the receive buffers count only at the root */
        MPI_Reduce(&test_total, &ignored[0], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&avg_comm_time, &ignored[1], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&overall_time, &ignored[2], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&tcomp_total, &ignored[3], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&wait_total, &ignored[4], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&init_total, &ignored[5], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&latency, &ignored[6], 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&latency, &ignored[7], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    } else {
        MPI_Reduce(MPI_IN_PLACE, &test_total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(MPI_IN_PLACE, &avg_comm_time, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(MPI_IN_PLACE, &overall_time, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(MPI_IN_PLACE, &tcomp_total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(MPI_IN_PLACE, &wait_total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(MPI_IN_PLACE, &init_total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(MPI_IN_PLACE, &min_comm_time, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(MPI_IN_PLACE, &max_comm_time, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0)
        return;
    overall_time /= nprocs;
    tcomp_total /= nprocs;
    test_total /= nprocs;
    avg_comm_time /= nprocs;
    wait_total /= nprocs;
    init_total /= nprocs;
    double compute = tcomp_total - test_total;
    double overlap = 100 - (((overall_time - compute) / avg_comm_time) * 100);
    overlap = 0 > overlap ? 0 : overlap; /* OSU's MAX(0, overlap) */
#ifdef NO_SIZES
    (void)size;
    printf("%13.2f", overall_time);
#else
    printf("%-10zu%18.2f", size, overall_time);
#endif
    if (full)
        printf("%18.2f%18.2f%18.2f%18.2f%18.2f%18.2f%18.2f%18.2f", compute, init_total, test_total,
               wait_total, avg_comm_time, min_comm_time, max_comm_time, overlap);
    else
        printf("%18.2f%18.2f%18.2f", compute, avg_comm_time, overlap);
    printf("\n");
    fflush(stdout);
}

/* One size: the two loops and the report. BARRIERS: a barrier before the pure loop and after
 * each of its iterations (all but osu_ibarrier). */
static void nbc_measure(int rank, int nprocs, size_t size, long iters, long warm, start_fn start,
                        int roots, int barriers)
{
    MPI_Request request;
    if (barriers)
        MPI_Barrier(MPI_COMM_WORLD);
    double timer = 0.0;
    for (long i = 0; i < iters + warm; i++) {
        int root = roots == ROOT_FIXED ? 0 : (int)(i % nprocs);
        double t_start = MPI_Wtime();
        start(size, root, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        double t_stop = MPI_Wtime();
        if (barriers)
            MPI_Barrier(MPI_COMM_WORLD);
        if (i >= warm)
            timer += t_stop - t_start;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double latency = timer * 1e6 / iters;
    double latency_in_secs = timer / iters;
    MPI_Barrier(MPI_COMM_WORLD);

    double tcomp_total = 0.0, test_total = 0.0, wait_total = 0.0, init_total = 0.0;
    timer = 0.0;
    for (long i = 0; i < iters + warm; i++) {
        int root = roots == ROOT_ROTATE ? (int)(i % nprocs) : 0;
        double t_start = MPI_Wtime();
        double init_time = MPI_Wtime();
        start(size, root, &request);
        init_time = MPI_Wtime() - init_time;
        double tcomp = MPI_Wtime();
        double test_time = dummy_compute(latency_in_secs, &request);
        tcomp = MPI_Wtime() - tcomp;
        double wait_time = MPI_Wtime();
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        wait_time = MPI_Wtime() - wait_time;
        double t_stop = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        if (i >= warm) {
            timer += t_stop - t_start;
            tcomp_total += tcomp;
            test_total += test_time;
            init_total += init_time;
            wait_total += wait_time;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    nbc_report(rank, nprocs, size, timer, latency, test_total, tcomp_total, wait_total,
               init_total, iters);
}

/* The whole test after begin() (and the buffers): header, then every size. */
static void nbc_run(int rank, int nprocs, start_fn start, int roots)
{
    nbc_print_header(rank);
    init_host_arrays();
#ifdef NO_SIZES
    nbc_measure(rank, nprocs, 0, iterations_large, skip_large, start, roots, 0);
#else
    for (size_t size = min_size; size <= max_size; size *= 2) {
        long iters = size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
        long warm = size > LARGE_MESSAGE_SIZE ? skip_large : skip;
        nbc_measure(rank, nprocs, size, iters, warm, start, roots, 1);
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
#endif
}

#endif /* KESTREL_OSU_NBC_H */
