/*
 * Shared by the one-sided C benchmarks (osu_put_latency.c ... osu_cas_latency.c): OSU 7.4's
 * one-sided options, help, start-up, header, windows and the timed loops, so that each
 * benchmark file holds only its operation. Build any of them with
 * mpicc -O2 -o osu_put_latency osu_put_latency.c (this header and osu_opts.h beside it).
 *
 * The including file defines TITLE and NAME, and may define:
 *   RMA_BW            a bandwidth test: OSU's bandwidth defaults (-i 100/20, -x 10/2), takes -W
 *                     (default 64 operations per synchronization), "Bandwidth (MB/s)" column;
 *   RMA_ACTIVE_ONLY   -s takes only pscw and fence (osu_put_bibw);
 *   RMA_TYPES         takes -T (osu_acc_latency, osu_fop_latency, osu_cas_latency);
 *   RMA_NO_FLOAT      -T without mpi_float, and "all" without it (osu_cas_latency: MPI allows
 *                     no floating-point type in MPI_Compare_and_swap, MPICH aborts);
 *   RMA_WIN_DEFAULT   the window creation without -w (default WIN_ALLOCATE);
 *   RMA_SYNC_DEFAULT  the synchronization without -s (default SYNC_FLUSH);
 *   RMA_GET_ACC_HELP  osu_get_acc_latency's own usage line (OSU's).
 * The -x and -i help lines are OSU's text (default 200 / 10000 whatever the test), as in the
 * other C benchmarks; the real defaults are the OSU_SKIP / OSU_ITERATIONS below.
 *
 * -w and -s (and -T) are OSU's but not osu_opts.h's: rma_begin() takes them out of argv
 * (getopt's rules: "-w X", "-wX", "--win-options=X", "--win-options X", unique prefixes of the
 * long names, in a cluster like "-vwX"), then hands the rest to begin(), so the first bad
 * option on the command line is the one reported, as with OSU's single getopt pass.
 */
#ifndef KESTREL_OSU_RMA_H
#define KESTREL_OSU_RMA_H

#if !defined(TITLE) || !defined(NAME)
#error "define TITLE and NAME before including osu_rma.h"
#endif

/* OSU 7.4 one-sided defaults (osu_util.h: MAX_MESSAGE_SIZE, LAT_* and BW_* loops). */
#define OSU_MIN_SIZE 1
#define OSU_MAX_SIZE (1 << 22)
#ifdef RMA_BW
#define OSU_ITERATIONS 100
#define OSU_ITERATIONS_LARGE 20
#define OSU_SKIP 10
#define OSU_SKIP_LARGE 2
#define RMA_OPTIONAL "W"
#define RMA_COLUMN "Bandwidth (MB/s)"
#else
#define OSU_ITERATIONS 10000
#define OSU_ITERATIONS_LARGE 1000
#define OSU_SKIP 100
#define OSU_SKIP_LARGE 10
#define RMA_OPTIONAL ""
#define RMA_COLUMN "Latency (us)"
#endif
#include "osu_opts.h"
#include <strings.h>

/* Window creation and synchronization, in the order of OSU's win_info[] and sync_info[]. */
enum { WIN_CREATE, WIN_ALLOCATE, WIN_DYNAMIC, WIN_KINDS };
enum { SYNC_LOCK, SYNC_PSCW, SYNC_FENCE, SYNC_FLUSH, SYNC_FLUSH_LOCAL, SYNC_LOCK_ALL, SYNC_KINDS };
static const char *const win_args[WIN_KINDS] = {"create", "allocate", "dynamic"};
static const char *const win_names[WIN_KINDS] = {"MPI_Win_create", "MPI_Win_allocate",
                                                 "MPI_Win_create_dynamic"};
static const char *const sync_args[SYNC_KINDS] = {"lock", "pscw", "fence",
                                                  "flush", "flush_local", "lock_all"};
static const char *const sync_names[SYNC_KINDS] = {
    "MPI_Win_lock/unlock", "MPI_Win_post/start/complete/wait", "MPI_Win_fence",
    "MPI_Win_flush", "MPI_Win_flush_local", "MPI_Win_lock_all/unlock_all"};

#ifndef RMA_WIN_DEFAULT
#define RMA_WIN_DEFAULT WIN_ALLOCATE
#endif
#ifndef RMA_SYNC_DEFAULT
#define RMA_SYNC_DEFAULT SYNC_FLUSH
#endif
static int win_kind = RMA_WIN_DEFAULT, sync_kind = RMA_SYNC_DEFAULT;

/* -T: OSU's mpi_char, mpi_int, mpi_float and all (the three in turn), and mpi_long_long (not
 * OSU's: the 8-byte atomics of OSU before 7.x). Each -T adds to the list; none: MPI_CHAR. */
enum { T_CHAR, T_INT, T_FLOAT, T_LONG_LONG };
static const char *const type_names[] = {"MPI_CHAR", "MPI_INT", "MPI_FLOAT", "MPI_LONG_LONG"};
#define MAX_TYPES 16
static int types[MAX_TYPES], ntypes = 0;

__attribute__((unused)) static MPI_Datatype mpi_type(int t)
{
    switch (t) {
    case T_INT: return MPI_INT;
    case T_FLOAT: return MPI_FLOAT;
    case T_LONG_LONG: return MPI_LONG_LONG;
    default: return MPI_CHAR;
    }
}

static void help(void)
{
#ifdef RMA_GET_ACC_HELP
    printf("Usage: ./%s -w <win_option>  -s < sync_option> [-x ITER] [-i ITER]\n", NAME);
#else
    printf("Usage: %s [options]\nOptions:\n", NAME);
#endif
    printf("  -w, --win-options         WIN_OPTION - Supports MPI>=3. Can be any of the follows:\n");
    printf("%28screate       use MPI_Win_create to create an MPI Window object\n", "");
    printf("%28sallocate     use MPI_Win_allocate to create an MPI Window object\n", "");
    printf("%28sdynamic      use MPI_Win_create_dynamic to create an MPI Window object\n", "");
    printf("%28s(default %s)\n", "", win_args[RMA_WIN_DEFAULT]);
    printf("  -s, --sync-option         SYNC_OPTION - can be any of the follows:\n");
    printf("%28spscw          use Post/Start/Complete/Wait synchronization calls\n", "");
    printf("%28sfence         use MPI_Win_fence synchronization call\n", "");
#ifndef RMA_ACTIVE_ONLY
    printf("%28slock          use MPI_Win_lock/unlock synchronizations calls\n", "");
    printf("%28sflush         use MPI_Win_flush synchronization call\n", "");
    printf("%28sflush_local   use MPI_Win_flush_local synchronization call\n", "");
    printf("%28slock_all      use MPI_Win_lock_all/unlock_all synchronization calls\n", "");
#endif
    printf("%28s(default %s)\n", "", sync_args[RMA_SYNC_DEFAULT]);
    printf("  -h, --help                print this help\n");
    printf("  -v, --version             print version info\n");
    printf("  -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n");
    printf("%28sbytes respectively. Examples:\n", "");
    printf("%28s-m 128      // min = default, max = 128\n", "");
    printf("%28s-m 2:128    // min = 2, max = 128\n", "");
    printf("%28s-m 2:       // min = 2, max = default\n", "");
    printf("  -x, --warmup              ITER - set number of warmup\n");
    printf("%28siterations to skip before timing (default 200)\n", "");
    printf("  -i, --iterations          ITER - number of iterations for timing (default 10000)\n");
#ifdef RMA_BW
    printf("  -W, --window-size         SIZE - set number of messages to send before synchronization (default 64)\n");
#endif
#ifdef RMA_TYPES
#ifdef RMA_NO_FLOAT
    printf("  -T, --type                [all,mpi_char,mpi_int] - Set MPI_TYPE . Default:MPI_CHAR.\n");
#else
    printf("  -T, --type                [all,mpi_char,mpi_int,mpi_float] - Set MPI_TYPE . Default:MPI_CHAR.\n");
#endif
    printf("%28s(also mpi_long_long: the 8-byte operation of OSU before 7.x)\n", "");
#endif
    printf("  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n");
    printf("%28s(default 536870912)\n", "");
}

/* OSU's process_one_sided_options (case-insensitive), and its -T (prefixes, as strncasecmp). */
static int set_rma_option(int c, const char *val)
{
    if (c == 'w') {
        for (int k = 0; k < WIN_KINDS; k++)
            if (!strcasecmp(val, win_args[k])) {
                win_kind = k;
                return 0;
            }
        return -1;
    }
    if (c == 's') {
        for (int k = 0; k < SYNC_KINDS; k++)
            if (!strcasecmp(val, sync_args[k])) {
#ifdef RMA_ACTIVE_ONLY
                if (k != SYNC_PSCW && k != SYNC_FENCE)
                    return -1;
#endif
                sync_kind = k;
                return 0;
            }
        return -1;
    }
    /* 'T' */
    int add[3], n = 0;
    if (!strncasecmp(val, "MPI_CHAR", 8))
        add[n++] = T_CHAR;
    else if (!strncasecmp(val, "MPI_INT", 7))
        add[n++] = T_INT;
#ifndef RMA_NO_FLOAT
    else if (!strncasecmp(val, "MPI_FLOAT", 9))
        add[n++] = T_FLOAT;
#endif
    else if (!strncasecmp(val, "MPI_LONG_LONG", 13))
        add[n++] = T_LONG_LONG;
    else if (!strncasecmp(val, "ALL", 3)) {
        add[n++] = T_CHAR;
        add[n++] = T_INT;
#ifndef RMA_NO_FLOAT
        add[n++] = T_FLOAT;
#endif
    } else
        return -1;
    for (int k = 0; k < n && ntypes < MAX_TYPES; k++)
        types[ntypes++] = add[k];
    return 0;
}

/* The long options this benchmark takes; VAL is the short option, ARG whether it needs one. */
static const struct {
    const char *name;
    char val, arg;
} rma_longs[] = {
    {"help", 'h', 0},        {"version", 'v', 0},    {"message-size", 'm', 1},
    {"warmup", 'x', 1},      {"iterations", 'i', 1}, {"mem-limit", 'M', 1},
#ifdef RMA_BW
    {"window-size", 'W', 1},
#endif
#ifdef RMA_TYPES
    {"type", 'T', 1},
#endif
    {"win-options", 'w', 1}, {"sync-option", 's', 1},
};
#define RMA_NLONGS (sizeof rma_longs / sizeof rma_longs[0])

static int rma_short(char c)
{
    return c == 'w' || c == 's'
#ifdef RMA_TYPES
           || c == 'T'
#endif
        ;
}

/* getopt_long's match of NAME (LEN bytes): the exact name, else a unique prefix; -1: none,
 * -2: ambiguous. */
static int rma_long_match(const char *name, size_t len)
{
    int found = -1, matches = 0;
    for (size_t k = 0; k < RMA_NLONGS; k++) {
        if (strncmp(rma_longs[k].name, name, len))
            continue;
        if (strlen(rma_longs[k].name) == len)
            return (int)k;
        found = (int)k;
        matches++;
    }
    return matches > 1 ? -2 : found;
}

static const char *rma_bad_message, *rma_bad_arg;
static char rma_bad_option[64];

/* Moves argv[1..] but -w, -s (and -T) into REST, stopping at the first bad one of those (whose
 * report waits for begin() to have passed the options before it); returns REST's count. */
static int rma_strip(int argc, char **argv, char **rest, int *bad)
{
    int n = 0, i = 1;
    *bad = 0;
    rest[n++] = argv[0];
    while (i < argc) {
        char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0' || !strcmp(a, "--"))
            break; /* "+": options end at the first operand */
        const char *val = NULL;
        char c = 0;
        int used = 1;
        if (a[1] == '-') {
            const char *name = a + 2;
            size_t len = strcspn(name, "=");
            const char *eq = name[len] == '=' ? name + len + 1 : NULL;
            int k = rma_long_match(name, len);
            if (k == -2) {
                /* getopt_long would call it ambiguous; report it here if one of ours matches. */
                int ours = 0;
                for (size_t j = 0; j < RMA_NLONGS; j++)
                    ours |= !strncmp(rma_longs[j].name, name, len) && rma_short(rma_longs[j].val);
                if (ours) {
                    rma_bad_message = "Invalid option";
                    snprintf(rma_bad_option, sizeof rma_bad_option, "--%.*s", (int)len, name);
                    rma_bad_arg = NULL;
                    *bad = 1;
                    return n;
                }
            }
            if (k < 0 || !rma_short(rma_longs[k].val)) {
                rest[n++] = argv[i++];
                if (k >= 0 && rma_longs[k].arg && !eq && i < argc)
                    rest[n++] = argv[i++];
                continue;
            }
            c = rma_longs[k].val;
            val = eq;
        } else {
            const char *p = a + 1;
            for (; *p && !rma_short(*p); p++)
                if (strchr("mxiMW", *p) && (*p != 'W' || strchr(RMA_OPTIONAL, 'W')))
                    break; /* the rest of the word (or the next word) is this option's value */
            if (!*p || !rma_short(*p)) {
                rest[n++] = argv[i++];
                if (*p && !p[1] && i < argc)
                    rest[n++] = argv[i++];
                continue;
            }
            if (p > a + 1) { /* keep the flags before it, as a word of their own */
                char *head = strndup(a, (size_t)(p - a));
                if (!head)
                    abort();
                rest[n++] = head;
            }
            c = *p;
            val = p[1] ? p + 1 : NULL;
        }
        if (!val) {
            if (i + 1 >= argc) {
                rma_bad_message = "Option Missing Required Argument";
                snprintf(rma_bad_option, sizeof rma_bad_option, "-%c", c);
                rma_bad_arg = NULL;
                *bad = 1;
                return n;
            }
            val = argv[i + 1];
            used = 2;
        }
        if (set_rma_option(c, val)) {
            rma_bad_message = "Invalid option or invalid argument";
            snprintf(rma_bad_option, sizeof rma_bad_option, "-%c", c);
            rma_bad_arg = val;
            *bad = 1;
            return n;
        }
        i += used;
    }
    while (i < argc)
        rest[n++] = argv[i++];
    rest[n] = NULL;
    return n;
}

static MPI_Group rma_world_group, rma_peer_group; /* for pscw: the other rank */

/* begin() with -w, -s (and -T): the exit status for main after MPI_Finalize, or -1 to run. */
static int rma_begin(int argc, char **argv, int *rank, int *nprocs)
{
    (void)pairs; /* osu_opts.h's osu_mbw_mr options, unused here (quiets -Wunused-variable) */
    (void)print_rate;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        abort();
    int bad, n = rma_strip(argc, argv, rest, &bad);
    /* REST (and the words strndup'ed for clusters) stays alive until exit, as argv does: it
     * is the argv MPI_Init sees. */
    int status = begin(n, rest, RMA_OPTIONAL, EXACTLY_TWO, rank, nprocs);
    if (status >= 0)
        return status;
    if (bad) {
        if (*rank == 0) {
            if (rma_bad_arg)
                fprintf(stderr, "%s [%s %s]\n\n", rma_bad_message, rma_bad_option, rma_bad_arg);
            else
                fprintf(stderr, "%s [%s]\n\n", rma_bad_message, rma_bad_option);
            help();
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    if (ntypes == 0)
        types[ntypes++] = T_CHAR;
    int peer = 1 - *rank;
    MPI_Comm_group(MPI_COMM_WORLD, &rma_world_group);
    MPI_Group_incl(rma_world_group, 1, &peer, &rma_peer_group);
    return -1;
}

static void rma_end(void)
{
    MPI_Group_free(&rma_peer_group);
    MPI_Group_free(&rma_world_group);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
}

/* -M (not an OSU one-sided option): the largest size whose BLOCKS buffers of `size` bytes (times
 * -W for the bandwidth tests) fit in the limit. */
static void rma_limit_to_memory(int rank, size_t blocks)
{
#ifdef RMA_BW
    blocks *= (size_t)window;
#endif
    size_t fits = (size_t)mem_limit / blocks;
    if (max_size > fits) {
        max_size = fits;
        if (rank == 0)
            fprintf(stderr, "Warning! Limiting max message size to: %zu. Increase -M, --mem-limit "
                            "for higher message sizes.\n", max_size);
    }
}

/* OSU's print_header_one_sided (TYPE NULL: no "# Datatype" line, as osu_get_acc_latency). */
static void rma_header(int rank, const char *type)
{
    if (rank != 0)
        return;
    printf("# %s v%s\n# Window creation: %s\n# Synchronization: %s\n", TITLE, VERSION,
           win_names[win_kind], sync_names[sync_kind]);
    if (type)
        printf("# Datatype: %s.\n", type);
    printf("%-10s%18s\n", "# Size", RMA_COLUMN);
    fflush(stdout);
}

/* One size's window and buffers (OSU's allocate_memory_one_sided, per size). */
struct rma {
    int rank;
    MPI_Win win;
    char *buf;      /* origin buffer */
    char *res;      /* result buffer (get_accumulate, fetch_and_op, compare_and_swap) */
    char *cmp;      /* compare buffer (compare_and_swap) */
    char *win_base; /* this rank's window memory */
    MPI_Aint disp;  /* the other rank's window start, as a target displacement */
    size_t size;    /* bytes per operation */
    int count;      /* elements per operation */
    MPI_Datatype type;
};

static char *rma_alloc(size_t bytes)
{
    char *p = NULL;
    if (posix_memalign((void **)&p, 4096, bytes ? bytes : 1)) {
        fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 'a', bytes);
    return p;
}

/* Opens a window of BYTES bytes per rank, with an origin buffer of as many and EXTRA more
 * (1: a result buffer, 2: a result and a compare buffer). */
static void rma_open(struct rma *r, int rank, size_t bytes, int extra)
{
    r->rank = rank;
    r->buf = rma_alloc(bytes);
    r->res = extra >= 1 ? rma_alloc(bytes) : NULL;
    r->cmp = extra >= 2 ? rma_alloc(bytes) : NULL;
    r->disp = 0;
    switch (win_kind) {
    case WIN_CREATE:
        r->win_base = rma_alloc(bytes);
        MPI_Win_create(r->win_base, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &r->win);
        break;
    case WIN_DYNAMIC: {
        MPI_Aint mine;
        r->win_base = rma_alloc(bytes);
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &r->win);
        MPI_Win_attach(r->win, r->win_base, (MPI_Aint)bytes);
        MPI_Get_address(r->win_base, &mine);
        MPI_Sendrecv(&mine, 1, MPI_AINT, 1 - rank, 1, &r->disp, 1, MPI_AINT, 1 - rank, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    }
    default:
        MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &r->win_base,
                         &r->win);
        memset(r->win_base, 'a', bytes);
        break;
    }
}

static void rma_close(struct rma *r)
{
    if (win_kind == WIN_DYNAMIC)
        MPI_Win_detach(r->win, r->win_base);
    MPI_Win_free(&r->win);
    if (win_kind != WIN_ALLOCATE)
        free(r->win_base);
    free(r->buf);
    free(r->res); /* free(NULL) is a no-op */
    free(r->cmp);
}

/* One operation on TARGET's window at byte OFFSET (0 but for the bandwidth tests' -W). */
typedef void (*rma_op)(struct rma *r, int target, size_t offset);

/* -i and -x for SIZE: the large-message values above 8 KiB, as OSU. */
static long rma_iterations(size_t size)
{
    return size > LARGE_MESSAGE_SIZE ? iterations_large : iterations;
}

static long rma_warmup(size_t size)
{
    return size > LARGE_MESSAGE_SIZE ? skip_large : skip;
}

#ifndef RMA_BW
/*
 * OSU's run_*_with_<sync> for the latency tests: WARM untimed then ITERS timed operations from
 * rank 0 to rank 1. lock: lock (LOCK_TYPE), operation, unlock each time; flush, flush_local:
 * one shared lock (FLUSH_LOCK_TYPE) around operation + flush[_local] each time; lock_all:
 * lock_all, operation, unlock_all each time; fence: rank 0 fence, operation, fence, fence and
 * rank 1 fence, fence, operation (to rank 0), fence; pscw: rank 0 start, operation, complete,
 * post, wait and rank 1 post, wait, start, operation (to rank 0), complete. Returns rank 0's
 * time per operation in microseconds (fence and pscw: half the time per iteration, both ranks
 * having had a turn); a barrier ends it.
 */
static double rma_latency(struct rma *r, rma_op op, long iters, long warm, int lock_type,
                          int flush_lock_type)
{
    double t_start = 0.0, t_end = 0.0, factor = 1.0;
    long total = iters + warm;
    int rank = r->rank;
    switch (sync_kind) {
    case SYNC_LOCK:
        if (rank == 0) {
            for (long i = 0; i < total; i++) {
                if (i == warm)
                    t_start = MPI_Wtime();
                MPI_Win_lock(lock_type, 1, 0, r->win);
                op(r, 1, 0);
                MPI_Win_unlock(1, r->win);
            }
            t_end = MPI_Wtime();
        }
        break;
    case SYNC_FLUSH:
    case SYNC_FLUSH_LOCAL:
        if (rank == 0) {
            MPI_Win_lock(flush_lock_type, 1, 0, r->win);
            for (long i = 0; i < total; i++) {
                if (i == warm)
                    t_start = MPI_Wtime();
                op(r, 1, 0);
                if (sync_kind == SYNC_FLUSH)
                    MPI_Win_flush(1, r->win);
                else
                    MPI_Win_flush_local(1, r->win);
            }
            t_end = MPI_Wtime();
            MPI_Win_unlock(1, r->win);
        }
        break;
    case SYNC_LOCK_ALL:
        if (rank == 0) {
            for (long i = 0; i < total; i++) {
                if (i == warm)
                    t_start = MPI_Wtime();
                MPI_Win_lock_all(0, r->win);
                op(r, 1, 0);
                MPI_Win_unlock_all(r->win);
            }
            t_end = MPI_Wtime();
        }
        break;
    case SYNC_FENCE:
        factor = 0.5;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (long i = 0; i < total; i++) {
                if (i == warm)
                    t_start = MPI_Wtime();
                MPI_Win_fence(0, r->win);
                op(r, 1, 0);
                MPI_Win_fence(0, r->win);
                MPI_Win_fence(0, r->win);
            }
            t_end = MPI_Wtime();
        } else {
            for (long i = 0; i < total; i++) {
                MPI_Win_fence(0, r->win);
                MPI_Win_fence(0, r->win);
                op(r, 0, 0);
                MPI_Win_fence(0, r->win);
            }
        }
        break;
    default: /* SYNC_PSCW */
        factor = 0.5;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (long i = 0; i < total; i++) {
                MPI_Win_start(rma_peer_group, 0, r->win);
                if (i == warm)
                    t_start = MPI_Wtime();
                op(r, 1, 0);
                MPI_Win_complete(r->win);
                MPI_Win_post(rma_peer_group, 0, r->win);
                MPI_Win_wait(r->win);
            }
            t_end = MPI_Wtime();
        } else {
            for (long i = 0; i < total; i++) {
                MPI_Win_post(rma_peer_group, 0, r->win);
                MPI_Win_wait(r->win);
                MPI_Win_start(rma_peer_group, 0, r->win);
                op(r, 0, 0);
                MPI_Win_complete(r->win);
            }
        }
        break;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return (t_end - t_start) * 1e6 * factor / (double)iters;
}

/* The latency of every size from -m (sizes smaller than one element of TYPE skipped, as OSU's
 * osu_acc_latency), each with a fresh window of `size` bytes and EXTRA more buffers (see
 * rma_open), printed as OSU does. */
__attribute__((unused)) static void rma_latency_sizes(int rank, rma_op op, int extra,
                                                      int type, int lock_type,
                                                      int flush_lock_type)
{
    int elem;
    MPI_Type_size(mpi_type(type), &elem);
    for (size_t size = min_size; size <= max_size; size *= 2) {
        if (size >= (size_t)elem) {
            struct rma r;
            long iters = rma_iterations(size), warm = rma_warmup(size);
            rma_open(&r, rank, size, extra);
            r.size = size;
            r.count = (int)(size / (size_t)elem);
            r.type = mpi_type(type);
            double lat = rma_latency(&r, op, iters, warm, lock_type, flush_lock_type);
            if (rank == 0) {
                printf("%-10zu%18.2f\n", size, lat);
                fflush(stdout);
            }
            rma_close(&r);
        }
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
}
#else
/*
 * OSU's run_*_with_<sync> for the bandwidth tests: per iteration -W operations of r->size bytes
 * from rank 0 to consecutive places of rank 1's window, then the synchronization (lock and
 * lock_all: around them; flush, flush_local: after them, within one shared lock; fence: rank 0
 * fence, operations, fence while rank 1 fences twice; pscw: rank 0 start, operations, complete
 * while rank 1 posts and waits). BIDIR (osu_put_bibw; fence and pscw only): rank 1 does the
 * same operations to rank 0 in the same epochs (pscw: both post, start, operate, complete,
 * wait). WARM untimed then ITERS timed iterations; returns rank 0's time in seconds; a barrier
 * ends it.
 */
static double rma_bandwidth(struct rma *r, rma_op op, long iters, long warm, int bidir)
{
    double t_start = 0.0, t_end = 0.0;
    long total = iters + warm;
    int rank = r->rank, peer = 1 - rank;
    size_t size = r->size;
    switch (sync_kind) {
    case SYNC_LOCK:
        if (rank == 0) {
            for (long i = 0; i < total; i++) {
                if (i == warm)
                    t_start = MPI_Wtime();
                MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, r->win);
                for (long j = 0; j < window; j++)
                    op(r, 1, (size_t)j * size);
                MPI_Win_unlock(1, r->win);
            }
            t_end = MPI_Wtime();
        }
        break;
    case SYNC_FLUSH:
    case SYNC_FLUSH_LOCAL:
        if (rank == 0) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, r->win);
            for (long i = 0; i < total; i++) {
                if (i == warm)
                    t_start = MPI_Wtime();
                for (long j = 0; j < window; j++)
                    op(r, 1, (size_t)j * size);
                if (sync_kind == SYNC_FLUSH)
                    MPI_Win_flush(1, r->win);
                else
                    MPI_Win_flush_local(1, r->win);
            }
            t_end = MPI_Wtime();
            MPI_Win_unlock(1, r->win);
        }
        break;
    case SYNC_LOCK_ALL:
        if (rank == 0) {
            for (long i = 0; i < total; i++) {
                if (i == warm)
                    t_start = MPI_Wtime();
                MPI_Win_lock_all(0, r->win);
                for (long j = 0; j < window; j++)
                    op(r, 1, (size_t)j * size);
                MPI_Win_unlock_all(r->win);
            }
            t_end = MPI_Wtime();
        }
        break;
    case SYNC_FENCE:
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < total; i++) {
            if (rank == 0 && i == warm)
                t_start = MPI_Wtime();
            MPI_Win_fence(0, r->win);
            if (rank == 0 || bidir)
                for (long j = 0; j < window; j++)
                    op(r, peer, (size_t)j * size);
            MPI_Win_fence(0, r->win);
        }
        t_end = MPI_Wtime();
        break;
    default: /* SYNC_PSCW */
        MPI_Barrier(MPI_COMM_WORLD);
        if (bidir) {
            for (long i = 0; i < total; i++) {
                if (rank == 0 && i == warm)
                    t_start = MPI_Wtime();
                MPI_Win_post(rma_peer_group, 0, r->win);
                MPI_Win_start(rma_peer_group, 0, r->win);
                for (long j = 0; j < window; j++)
                    op(r, peer, (size_t)j * size);
                MPI_Win_complete(r->win);
                MPI_Win_wait(r->win);
            }
            t_end = MPI_Wtime();
        } else if (rank == 0) {
            for (long i = 0; i < total; i++) {
                MPI_Win_start(rma_peer_group, 0, r->win);
                if (i == warm)
                    t_start = MPI_Wtime();
                for (long j = 0; j < window; j++)
                    op(r, 1, (size_t)j * size);
                MPI_Win_complete(r->win);
            }
            t_end = MPI_Wtime();
        } else {
            for (long i = 0; i < total; i++) {
                MPI_Win_post(rma_peer_group, 0, r->win);
                MPI_Win_wait(r->win);
            }
        }
        break;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return t_end - t_start;
}

/* The bandwidth of every size from -m, each with a fresh window of size * -W bytes: OSU's
 * size / 1e6 * iterations * window / time (times 2 when BIDIR), in MB/s. */
static void rma_bandwidth_sizes(int rank, rma_op op, int bidir)
{
    for (size_t size = min_size; size <= max_size; size *= 2) {
        struct rma r;
        long iters = rma_iterations(size), warm = rma_warmup(size);
        rma_open(&r, rank, size * (size_t)window, 0);
        r.size = size;
        r.count = (int)size;
        r.type = MPI_CHAR;
        double t = rma_bandwidth(&r, op, iters, warm, bidir);
        if (rank == 0) {
            double bw = (double)size / 1e6 * (double)iters * (double)window / t;
            printf("%-10zu%18.2f\n", size, bidir ? bw * 2 : bw);
            fflush(stdout);
        }
        rma_close(&r);
        if (size > max_size / 2)
            break; /* the next doubling would pass the maximum (or overflow) */
    }
}
#endif /* RMA_BW */

#endif /* KESTREL_OSU_RMA_H */
