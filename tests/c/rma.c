/*
 * One-sided communication, windows and operations. Window flavors: MPI_Win_create on
 * malloc'd memory (disp_unit sizeof(int) and 1), MPI_Win_allocate, MPI_Win_allocate_shared
 * on the MPI_COMM_TYPE_SHARED split of MPI_COMM_WORLD with MPI_Win_shared_query (each
 * peer's size and disp_unit, contiguous segments, MPI_PROC_NULL, direct loads and stores
 * through a peer's pointer after MPI_Win_sync + barrier, a put read back by a load) and
 * MPI_Win_create_dynamic with MPI_Win_attach/detach (addresses from MPI_Get_address,
 * MPI_Aint_add, exchanged with MPI_Allgather of MPI_AINT; a detach and a new attach).
 * Window attributes MPI_WIN_BASE/SIZE/DISP_UNIT/CREATE_FLAVOR/MODEL, MPI_Win_set/get_name,
 * MPI_Win_get_group (MPI_IDENT to the communicator's group), MPI_Win_get/set_info,
 * MPI_Win_set/get_errhandler. Under MPI_Win_fence: MPI_Put/MPI_Get of ints and doubles
 * with target displacements; MPI_Accumulate with every predefined operation that applies
 * (SUM, PROD, MAX, MIN, BAND, BOR, BXOR, LAND, LOR, LXOR, REPLACE) on MPI_INT,
 * MPI_UNSIGNED_LONG, MPI_SIGNED_CHAR, MPI_INT8_T, MPI_DOUBLE (arithmetic only) and MPI_CHAR
 * (REPLACE only), all ranks into one target; MAXLOC/MINLOC on MPI_2INT and MPI_DOUBLE_INT
 * (ties keep the lowest index); MPI_Get_accumulate (SUM, NO_OP), MPI_Fetch_and_op (SUM,
 * REPLACE, NO_OP), MPI_Compare_and_swap (success and failure), where concurrent atomic
 * SUMs must fetch a chain of distinct partial sums; all checked against values computed
 * serially here. Large transfers: a 1 MiB put and get, an accumulate of 100,000 doubles.
 * Derived datatypes on both sides (origin vector, target contiguous or indexed) for put,
 * get and accumulate. Request-based MPI_Rput/Rget/Raccumulate/Rget_accumulate in a
 * lock_all epoch, completed with MPI_Wait, an MPI_Test loop and MPI_Waitall. Concurrent
 * MPI_Accumulate(SUM) from every rank to one element of rank 0 under shared locks.
 * Any number of ranks (1-6 tested); with one rank every neighbour is the rank itself.
 * An access outside the target window is checked on Kestrel only (MPI_ERR_RMA_RANGE,
 * nothing written): MPICH 4.0.2 does not detect it (the put returns MPI_SUCCESS and writes
 * past the window), so the check is skipped there.
 */
#include "check.h"
#include <stdint.h>

static int rank, size, left, right;

/* ---------------------------------------------------------------- attributes, names */

static void check_attrs(MPI_Win win, void *base, MPI_Aint bytes, int disp_unit, int flavor,
                        const char *what)
{
    int flag = 0;
    void *b = (void *)&flag;
    OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &b, &flag));
    CHECK(flag && b == base, "%s: MPI_WIN_BASE %p (flag %d), expected %p", what, b, flag,
          base);
    MPI_Aint *sz = NULL;
    flag = 0;
    OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &sz, &flag));
    CHECK(flag && sz != NULL && *sz == bytes, "%s: MPI_WIN_SIZE %ld (flag %d), expected %ld",
          what, sz ? (long)*sz : -1L, flag, (long)bytes);
    int *du = NULL;
    flag = 0;
    OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &du, &flag));
    CHECK(flag && du != NULL && *du == disp_unit,
          "%s: MPI_WIN_DISP_UNIT %d (flag %d), expected %d", what, du ? *du : -1, flag,
          disp_unit);
    int *fl = NULL;
    flag = 0;
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fl, &flag));
    CHECK(flag && fl != NULL && *fl == flavor,
          "%s: MPI_WIN_CREATE_FLAVOR %d (flag %d), expected %d", what, fl ? *fl : -1, flag,
          flavor);
    int *model = NULL;
    flag = 0;
    OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && model != NULL && (*model == MPI_WIN_UNIFIED || *model == MPI_WIN_SEPARATE),
          "%s: MPI_WIN_MODEL %d (flag %d)", what, model ? *model : -1, flag);
}

/* Name, group, info and error handler of a window over `comm`. */
static void check_misc(MPI_Win win, MPI_Comm comm, const char *name)
{
    char got[MPI_MAX_OBJECT_NAME];
    int len = -1;
    OK(MPI_Win_get_name(win, got, &len));
    CHECK(len == 0 && got[0] == '\0', "%s: unnamed window has name '%s' (len %d)", name, got,
          len);
    OK(MPI_Win_set_name(win, name));
    OK(MPI_Win_get_name(win, got, &len));
    CHECK(strcmp(got, name) == 0 && len == (int)strlen(name), "name '%s' (len %d), set '%s'",
          got, len, name);

    MPI_Group wg, cg;
    int cmp = -1;
    OK(MPI_Win_get_group(win, &wg));
    OK(MPI_Comm_group(comm, &cg));
    OK(MPI_Group_compare(wg, cg, &cmp));
    CHECK(cmp == MPI_IDENT, "%s: window group vs communicator group: %d, expected MPI_IDENT",
          name, cmp);
    OK(MPI_Group_free(&wg));
    OK(MPI_Group_free(&cg));
    CHECK(wg == MPI_GROUP_NULL, "%s: MPI_Group_free did not set MPI_GROUP_NULL", name);

    MPI_Info info = MPI_INFO_NULL, set;
    OK(MPI_Win_get_info(win, &info));
    CHECK(info != MPI_INFO_NULL, "%s: MPI_Win_get_info gave MPI_INFO_NULL", name);
    OK(MPI_Info_free(&info));
    OK(MPI_Info_create(&set));
    OK(MPI_Info_set(set, "kestrel_test_hint", "ignored"));
    OK(MPI_Info_set(set, "accumulate_ordering", "rar,raw,war,waw"));
    OK(MPI_Win_set_info(win, set));
    OK(MPI_Info_free(&set));
    OK(MPI_Win_get_info(win, &info));
    OK(MPI_Info_free(&info));

    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    OK(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "%s: default window error handler is not fatal", name);
    OK(MPI_Errhandler_free(&eh));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    OK(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "%s: error handler not MPI_ERRORS_RETURN after set", name);
    OK(MPI_Errhandler_free(&eh));
}

/* ---------------------------------------------------------------- put/get under fence */

/* MPI_Win_create over malloc'd ints (disp_unit sizeof(int)) and doubles (disp_unit 1). */
static void fence_put_get(void)
{
    enum { N = 16 };
    int *w = malloc(N * sizeof(int));
    CHECK(w != NULL, "malloc");
    for (int i = 0; i < N; i++)
        w[i] = rank * 1000 + i;
    MPI_Win win;
    OK(MPI_Win_create(w, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, w, N * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_CREATE, "create int");
    check_misc(win, MPI_COMM_WORLD, "kestrel int window");

    /* Put 5 ints to the right at displacement 2; get 4 ints from the right at 10. */
    int out[5], in[6];
    for (int i = 0; i < 5; i++)
        out[i] = -(rank * 100 + i) - 1;
    for (int i = 0; i < 6; i++)
        in[i] = -7;
    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    OK(MPI_Put(out, 5, MPI_INT, right, 2, 5, MPI_INT, win));
    OK(MPI_Get(in + 1, 4, MPI_INT, right, 10, 4, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) {
        int exp = (i >= 2 && i < 7) ? -(left * 100 + i - 2) - 1 : rank * 1000 + i;
        CHECK(w[i] == exp, "int window element %d = %d after put from rank %d, expected %d", i,
              w[i], left, exp);
    }
    CHECK(in[0] == -7 && in[5] == -7, "get wrote outside its 4 ints: %d %d", in[0], in[5]);
    for (int i = 0; i < 4; i++)
        CHECK(in[i + 1] == right * 1000 + 10 + i, "get element %d = %d, expected %d", i,
              in[i + 1], right * 1000 + 10 + i);
    /* A put of 0 elements and one to MPI_PROC_NULL do nothing. */
    OK(MPI_Put(out, 0, MPI_INT, right, 0, 0, MPI_INT, win));
    OK(MPI_Put(out, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win));
    OK(MPI_Get(in, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(w[0] == rank * 1000 && in[0] == -7, "zero-count or MPI_PROC_NULL transfer moved data");
    OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "MPI_Win_free did not set MPI_WIN_NULL");
    free(w);

    /* Doubles, disp_unit 1: displacements in bytes. */
    double *d = malloc(N * sizeof(double));
    CHECK(d != NULL, "malloc");
    for (int i = 0; i < N; i++)
        d[i] = rank + i * 0.125;
    OK(MPI_Win_create(d, N * sizeof(double), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, d, N * sizeof(double), 1, MPI_WIN_FLAVOR_CREATE, "create double");
    double dout[3] = {rank + 0.5, rank + 1.5, -rank - 0.25}, din[3] = {0, 0, 0};
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(dout, 3, MPI_DOUBLE, right, 3 * sizeof(double), 3, MPI_DOUBLE, win));
    OK(MPI_Get(din, 3, MPI_DOUBLE, right, 9 * sizeof(double), 3, MPI_DOUBLE, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) {
        double exp = i == 3 ? left + 0.5 : i == 4 ? left + 1.5 : i == 5 ? -left - 0.25
                                                                        : rank + i * 0.125;
        CHECK(d[i] == exp, "double window element %d = %g, expected %g", i, d[i], exp);
    }
    for (int i = 0; i < 3; i++)
        CHECK(din[i] == right + (9 + i) * 0.125, "double get element %d = %g, expected %g", i,
              din[i], right + (9 + i) * 0.125);
    OK(MPI_Win_free(&win));
    free(d);
}

/* ---------------------------------------------------------------- shared memory */

static void shared(void)
{
    MPI_Comm shm;
    int lr, ln;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm));
    OK(MPI_Comm_rank(shm, &lr));
    OK(MPI_Comm_size(shm, &ln));
    int cnt = lr + 2; /* every segment has a different size */
    int *base = NULL;
    MPI_Win win;
    OK(MPI_Win_allocate_shared(cnt * sizeof(int), sizeof(int), MPI_INFO_NULL, shm, &base,
                               &win));
    CHECK(base != NULL, "MPI_Win_allocate_shared gave a NULL base");
    check_attrs(win, base, cnt * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_SHARED, "shared");
    check_misc(win, shm, "kestrel shared window");

    OK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int i = 0; i < cnt; i++)
        base[i] = lr * 100 + i;
    OK(MPI_Win_sync(win));
    OK(MPI_Barrier(shm));
    OK(MPI_Win_sync(win));
    char *prev_end = NULL;
    for (int p = 0; p < ln; p++) {
        MPI_Aint sz = -1;
        int du = -1;
        int *pb = NULL;
        OK(MPI_Win_shared_query(win, p, &sz, &du, &pb));
        CHECK(sz == (MPI_Aint)((p + 2) * sizeof(int)) && du == (int)sizeof(int) && pb != NULL,
              "shared_query(%d): size %ld disp_unit %d base %p", p, (long)sz, du, (void *)pb);
        CHECK(p != lr || pb == base, "shared_query of myself gave %p, my base is %p",
              (void *)pb, (void *)base);
        /* Default allocation is contiguous across ranks. */
        CHECK(p == 0 || (char *)pb == prev_end,
              "segment of %d starts at %p, previous segment ends at %p", p, (void *)pb,
              (void *)prev_end);
        prev_end = (char *)pb + sz;
        for (int i = 0; i < p + 2; i++)
            CHECK(pb[i] == p * 100 + i, "load of peer %d element %d = %d, expected %d", p, i,
                  pb[i], p * 100 + i);
    }
    {
        MPI_Aint sz = -1;
        int du = -1;
        int *pb = NULL, *p0 = NULL;
        OK(MPI_Win_shared_query(win, 0, &sz, &du, &p0));
        OK(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &pb));
        CHECK(pb == p0 && sz == 2 * (MPI_Aint)sizeof(int),
              "shared_query(MPI_PROC_NULL) gave %p size %ld, rank 0's segment is %p",
              (void *)pb, (long)sz, (void *)p0);
    }
    OK(MPI_Barrier(shm)); /* everybody read before anybody stores again */
    /* Store into the right peer's element 0 through its pointer; the owner loads it. */
    int rp = (lr + 1) % ln, lp = (lr + ln - 1) % ln;
    {
        MPI_Aint sz;
        int du;
        int *pb = NULL;
        OK(MPI_Win_shared_query(win, rp, &sz, &du, &pb));
        pb[0] = -(lr + 1);
    }
    OK(MPI_Win_sync(win));
    OK(MPI_Barrier(shm));
    OK(MPI_Win_sync(win));
    CHECK(base[0] == -(lp + 1), "element 0 stored by peer %d through its pointer: %d, "
                                "expected %d", lp, base[0], -(lp + 1));
    OK(MPI_Win_unlock_all(win));

    /* An MPI_Put through the shared window, read by a load after the fence. */
    int v = 7000 + lr;
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(&v, 1, MPI_INT, rp, 1, 1, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    CHECK(base[1] == 7000 + lp, "element 1 put by peer %d: %d, expected %d", lp, base[1],
          7000 + lp);
    OK(MPI_Win_free(&win));
    OK(MPI_Comm_free(&shm));
}

/* ---------------------------------------------------------------- dynamic windows */

static void dynamic(void)
{
    MPI_Win win;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, MPI_BOTTOM, 0, 1, MPI_WIN_FLAVOR_DYNAMIC, "dynamic");
    check_misc(win, MPI_COMM_WORLD, "kestrel dynamic window");

    int *a = malloc(16 * sizeof(int)), *c = malloc(8 * sizeof(int));
    double *b = malloc(8 * sizeof(double));
    CHECK(a && b && c, "malloc");
    for (int i = 0; i < 16; i++)
        a[i] = rank * 100 + i;
    for (int i = 0; i < 8; i++)
        b[i] = rank + i / 4.0;
    OK(MPI_Win_attach(win, a, 16 * sizeof(int)));
    OK(MPI_Win_attach(win, b, 8 * sizeof(double)));
    MPI_Aint mine[2], *all = malloc(2 * size * sizeof(MPI_Aint));
    CHECK(all != NULL, "malloc");
    OK(MPI_Get_address(a, &mine[0]));
    OK(MPI_Get_address(b, &mine[1]));
    OK(MPI_Allgather(mine, 2, MPI_AINT, all, 2, MPI_AINT, MPI_COMM_WORLD));

    int out[3] = {-rank - 1, -rank - 2, -rank - 3}, in[2] = {0, 0};
    double din[8];
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(out, 3, MPI_INT, right, MPI_Aint_add(all[2 * right], 4 * sizeof(int)), 3,
               MPI_INT, win));
    OK(MPI_Get(in, 2, MPI_INT, right, MPI_Aint_add(all[2 * right], 12 * sizeof(int)), 2,
               MPI_INT, win));
    OK(MPI_Get(din, 8, MPI_DOUBLE, right, all[2 * right + 1], 8, MPI_DOUBLE, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 16; i++) {
        int exp = (i >= 4 && i < 7) ? -left - 1 - (i - 4) : rank * 100 + i;
        CHECK(a[i] == exp, "dynamic: attached element %d = %d, expected %d", i, a[i], exp);
    }
    CHECK(in[0] == right * 100 + 12 && in[1] == right * 100 + 13,
          "dynamic: get gave %d %d, expected %d %d", in[0], in[1], right * 100 + 12,
          right * 100 + 13);
    for (int i = 0; i < 8; i++)
        CHECK(din[i] == right + i / 4.0, "dynamic: double %d = %g, expected %g", i, din[i],
              right + i / 4.0);

    /* Detach a, attach c, exchange the new addresses, put into c. */
    OK(MPI_Win_detach(win, a));
    for (int i = 0; i < 8; i++)
        c[i] = -1;
    OK(MPI_Win_attach(win, c, 8 * sizeof(int)));
    OK(MPI_Get_address(c, &mine[0]));
    OK(MPI_Allgather(mine, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(out, 2, MPI_INT, right, MPI_Aint_add(all[right], sizeof(int)), 2, MPI_INT,
               win));
    OK(MPI_Win_fence(0, win));
    CHECK(c[0] == -1 && c[1] == -left - 1 && c[2] == -left - 2 && c[3] == -1,
          "dynamic: newly attached region holds %d %d %d %d", c[0], c[1], c[2], c[3]);
    OK(MPI_Win_detach(win, b));
    OK(MPI_Win_detach(win, c));
    OK(MPI_Win_free(&win));
    free(a);
    free(b);
    free(c);
    free(all);
}

/* ---------------------------------------------------------------- accumulate */

enum { NE = 3, SLOT = 64 };

/* Serial model of the predefined operations, on long values (doubles here are small
 * integers, so exact). */
static long apply(MPI_Op op, long a, long b)
{
    if (op == MPI_SUM)
        return (long)((unsigned long)a + (unsigned long)b);
    if (op == MPI_PROD)
        return (long)((unsigned long)a * (unsigned long)b);
    if (op == MPI_MAX)
        return a > b ? a : b;
    if (op == MPI_MIN)
        return a < b ? a : b;
    if (op == MPI_BAND)
        return a & b;
    if (op == MPI_BOR)
        return a | b;
    if (op == MPI_BXOR)
        return a ^ b;
    if (op == MPI_LAND)
        return a && b;
    if (op == MPI_LOR)
        return a || b;
    if (op == MPI_LXOR)
        return !a != !b;
    return b; /* MPI_REPLACE */
}

/* The value a long takes once stored in `dt` (wraps like the hardware does). */
static long as_type(MPI_Datatype dt, long v)
{
    if (dt == MPI_INT)
        return (int)v;
    if (dt == MPI_SIGNED_CHAR || dt == MPI_INT8_T)
        return (int8_t)v;
    if (dt == MPI_CHAR)
        return (char)v;
    if (dt == MPI_UNSIGNED_LONG)
        return (long)(unsigned long)v;
    return v;
}
static void store(MPI_Datatype dt, void *p, long v)
{
    if (dt == MPI_INT)
        *(int *)p = (int)v;
    else if (dt == MPI_SIGNED_CHAR)
        *(signed char *)p = (signed char)v;
    else if (dt == MPI_INT8_T)
        *(int8_t *)p = (int8_t)v;
    else if (dt == MPI_CHAR)
        *(char *)p = (char)v;
    else if (dt == MPI_UNSIGNED_LONG)
        *(unsigned long *)p = (unsigned long)v;
    else
        *(double *)p = (double)v;
}
/* Whether the stored element equals v, and what it is (for messages). */
static int equals(MPI_Datatype dt, const void *p, long v, double *got)
{
    if (dt == MPI_DOUBLE) {
        *got = *(const double *)p;
        return *got == (double)v;
    }
    long g = dt == MPI_INT               ? *(const int *)p
             : dt == MPI_SIGNED_CHAR     ? *(const signed char *)p
             : dt == MPI_INT8_T          ? *(const int8_t *)p
             : dt == MPI_CHAR            ? *(const char *)p
                                         : (long)*(const unsigned long *)p;
    *got = (double)g;
    return g == as_type(dt, v);
}
static int tsize(MPI_Datatype dt)
{
    int s = 0;
    MPI_Type_size(dt, &s);
    return s;
}

/* Rank r's operand for element i; sgn: the type is signed. */
static long gen(MPI_Op op, int r, int i, int sgn)
{
    if (op == MPI_SUM)
        return (r * 3 + i) % 7 - (sgn ? 3 : 0);
    if (op == MPI_PROD)
        return (r + i) % 4 == 1 ? 2 : (sgn && (r + i) % 4 == 3) ? -1 : 1;
    if (op == MPI_MAX || op == MPI_MIN)
        return (r * 7 + i * 3) % 11 - (sgn ? 5 : 0);
    if (op == MPI_BAND)
        return 0x7f & ~(1 << ((r + i) % 7));
    if (op == MPI_BOR)
        return 1 << ((r * 2 + i) % 7);
    if (op == MPI_BXOR)
        return (r * 37 + i * 11) & 0x7f;
    if (op == MPI_LAND)
        return (r + i) % 5 == 4 ? 0 : r + 1;
    if (op == MPI_LOR)
        return i == 0 ? 0 : (r + i) % 3 == 0 ? r + 2 : 0;
    if (op == MPI_LXOR)
        return (r + i) % 3 == 0 ? 3 : 0;
    return 40 + r * 2 + i; /* MPI_REPLACE */
}
static long init_of(MPI_Op op, int i)
{
    if (op == MPI_SUM)
        return 10 + i;
    if (op == MPI_PROD)
        return 1 + i % 2;
    if (op == MPI_MAX || op == MPI_MIN)
        return 2;
    if (op == MPI_BAND)
        return 0x7f;
    if (op == MPI_BOR)
        return 0x40;
    if (op == MPI_BXOR)
        return 0x55;
    if (op == MPI_LAND)
        return 1 + i;
    if (op == MPI_LOR)
        return 0;
    if (op == MPI_LXOR)
        return i % 2;
    return 99;
}

typedef struct {
    int v, loc;
} int2;
typedef struct {
    double v;
    int loc;
} dblint;

static int2 loc_of(int r, int i)
{
    return (int2){(r * 5 + i * 3) % 3, r};
}
static int2 loc_apply(MPI_Op op, int2 a, int2 b)
{
    int take_a = op == MPI_MAXLOC ? a.v > b.v : a.v < b.v;
    int take_b = op == MPI_MAXLOC ? b.v > a.v : b.v < a.v;
    if (take_a)
        return a;
    if (take_b)
        return b;
    return (int2){a.v, a.loc < b.loc ? a.loc : b.loc};
}

/* Local stores to MPI_Win_allocate memory are done on every rank before the epoch's first
 * fence: a barrier, not the fence, guarantees it. MPICH 4.0.2's opening fence did not always
 * wait for the other ranks (seen once in CI at 4 oversubscribed ranks: a 1 MiB get read a
 * peer's window before the peer's own initial stores), and MPI only says a fence usually
 * synchronizes. */
static void stores_done(void)
{
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void accumulate(void)
{
    MPI_Op ops[] = {MPI_SUM,  MPI_PROD, MPI_MAX, MPI_MIN,  MPI_BAND,   MPI_BOR,
                    MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_REPLACE};
    const char *opn[] = {"SUM",  "PROD", "MAX", "MIN",  "BAND",   "BOR",
                         "BXOR", "LAND", "LOR", "LXOR", "REPLACE"};
    enum { NOPS = 11, NT = 6 };
    MPI_Datatype types[NT] = {MPI_INT,    MPI_UNSIGNED_LONG, MPI_SIGNED_CHAR,
                              MPI_INT8_T, MPI_DOUBLE,        MPI_CHAR};
    const char *tn[NT] = {"MPI_INT",    "MPI_UNSIGNED_LONG", "MPI_SIGNED_CHAR",
                          "MPI_INT8_T", "MPI_DOUBLE",        "MPI_CHAR"};
    int sgn[NT] = {1, 0, 1, 1, 1, 1};

    /* The (type, op) pairs that apply, one window slot each. */
    int st[NT * NOPS], so[NT * NOPS], nslot = 0;
    for (int t = 0; t < NT; t++)
        for (int o = 0; o < NOPS; o++) {
            int arith = o < 4, replace = o == NOPS - 1;
            if (types[t] == MPI_DOUBLE && !arith && !replace)
                continue;
            if (types[t] == MPI_CHAR && !replace)
                continue;
            st[nslot] = t;
            so[nslot++] = o;
        }
    int nloc = 4; /* MAXLOC/MINLOC x MPI_2INT/MPI_DOUBLE_INT */
    int total = nslot + nloc;

    char *w = NULL;
    MPI_Win win;
    OK(MPI_Win_allocate(total * SLOT, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win));
    CHECK(w != NULL, "MPI_Win_allocate gave NULL");
    check_attrs(win, w, total * SLOT, 1, MPI_WIN_FLAVOR_ALLOCATE, "allocate");
    check_misc(win, MPI_COMM_WORLD, "kestrel accumulate window");
    char *org = malloc(total * SLOT);
    CHECK(org != NULL, "malloc");
    MPI_Op locop[2] = {MPI_MAXLOC, MPI_MINLOC};

    /* Local stores before the first fence (the window is not yet in an epoch). */
    for (int s = 0; s < nslot; s++) {
        MPI_Datatype dt = types[st[s]];
        int es = tsize(dt);
        for (int i = 0; i < NE; i++) {
            store(dt, w + s * SLOT + i * es, init_of(ops[so[s]], i));
            store(dt, org + s * SLOT + i * es, gen(ops[so[s]], rank, i, sgn[st[s]]));
        }
    }
    for (int k = 0; k < nloc; k++) {
        char *wp = w + (nslot + k) * SLOT, *op = org + (nslot + k) * SLOT;
        for (int i = 0; i < NE; i++) {
            int2 x = loc_of(rank, i);
            if (k < 2) {
                ((int2 *)wp)[i] = (int2){1, 1000};
                ((int2 *)op)[i] = x;
            } else {
                ((dblint *)wp)[i] = (dblint){1.0, 1000};
                ((dblint *)op)[i] = (dblint){x.v, x.loc};
            }
        }
    }

    stores_done();
    OK(MPI_Win_fence(0, win));
    for (int s = 0; s < nslot; s++) {
        int target = s % size;
        MPI_Op op = ops[so[s]];
        if (op == MPI_REPLACE && rank != (target + size - 1) % size)
            continue; /* one writer per element: the target's left neighbour */
        OK(MPI_Accumulate(org + s * SLOT, NE, types[st[s]], target, s * SLOT, NE,
                          types[st[s]], op, win));
    }
    for (int k = 0; k < nloc; k++) {
        int s = nslot + k;
        MPI_Datatype dt = k < 2 ? MPI_2INT : MPI_DOUBLE_INT;
        OK(MPI_Accumulate(org + s * SLOT, NE, dt, s % size, s * SLOT, NE, dt, locop[k % 2],
                          win));
    }
    OK(MPI_Win_fence(0, win));

    for (int s = 0; s < nslot; s++) {
        int target = s % size;
        MPI_Op op = ops[so[s]];
        MPI_Datatype dt = types[st[s]];
        int es = tsize(dt);
        for (int i = 0; i < NE; i++) {
            long exp = as_type(dt, init_of(op, i));
            if (rank == target)
                for (int r = 0; r < size; r++)
                    if (op != MPI_REPLACE || r == (target + size - 1) % size)
                        exp = as_type(dt, apply(op, exp, as_type(dt, gen(op, r, i, sgn[st[s]]))));
            double got = 0;
            CHECK(equals(dt, w + s * SLOT + i * es, exp, &got),
                  "accumulate %s on %s from %d ranks, element %d: %g, expected %ld", opn[so[s]],
                  tn[st[s]], size, i, got, exp);
        }
    }
    for (int k = 0; k < nloc; k++) {
        int s = nslot + k;
        for (int i = 0; i < NE; i++) {
            int2 exp = {1, 1000};
            if (rank == s % size)
                for (int r = 0; r < size; r++)
                    exp = loc_apply(locop[k % 2], exp, loc_of(r, i));
            int2 got;
            if (k < 2)
                got = ((int2 *)(w + s * SLOT))[i];
            else {
                dblint d = ((dblint *)(w + s * SLOT))[i];
                got = (int2){(int)d.v, d.loc};
                CHECK(d.v == (double)got.v, "MPI_DOUBLE_INT value %g not integral", d.v);
            }
            CHECK(got.v == exp.v && got.loc == exp.loc,
                  "accumulate %s on %s element %d: (%d, %d), expected (%d, %d)",
                  k % 2 ? "MINLOC" : "MAXLOC", k < 2 ? "MPI_2INT" : "MPI_DOUBLE_INT", i, got.v,
                  got.loc, exp.v, exp.loc);
        }
    }
    OK(MPI_Win_free(&win));
    free(org);
}

/* ---------------------------------------------------------------- atomics */

/* Each rank atomically added contrib to a counter on rank 0 that went from init to final
 * and fetched `fetched`: the fetched values must be the partial sums of one order. */
static void chain_check(int fetched, int contrib, int init, int final, const char *what)
{
    int pair[2] = {fetched, contrib}, *all = NULL;
    if (rank == 0) {
        all = malloc(2 * size * sizeof(int));
        CHECK(all != NULL, "malloc");
    }
    OK(MPI_Gather(pair, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank != 0)
        return;
    int cur = init;
    char *used = calloc(size, 1);
    CHECK(used != NULL, "malloc");
    for (int k = 0; k < size; k++) {
        int r = 0;
        while (r < size && (used[r] || all[2 * r] != cur))
            r++;
        CHECK(r < size, "%s: no rank fetched the partial sum %d (step %d of %d)", what, cur, k,
              size);
        used[r] = 1;
        cur += all[2 * r + 1];
    }
    CHECK(cur == final, "%s: counter ended at %d, the fetched chain gives %d", what, final,
          cur);
    free(used);
    free(all);
}

static void atomics(void)
{
    enum { N = 16 };
    int *w = malloc(N * sizeof(int));
    CHECK(w != NULL, "malloc");
    MPI_Win win;
    OK(MPI_Win_create(w, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    /* 0..2: Get_accumulate SUM counters on rank 0; 3: Fetch_and_op SUM counter on rank 0;
     * 4..6 read by Get_accumulate NO_OP; 7: Fetch_and_op REPLACE; 8: Fetch_and_op NO_OP;
     * 9: CAS that succeeds; 10: CAS that fails. */
    for (int i = 0; i < N; i++)
        w[i] = rank * 10000 + i;
    w[0] = w[1] = w[2] = w[3] = 50;
    int gin[3], gout[3], fsum = -1, gnop[3] = {-1, -1, -1}, frep = -1, fnop = -1;
    int cas_ok = -1, cas_fail = -1;
    for (int e = 0; e < 3; e++) {
        gin[e] = (rank + 1) * (e + 1);
        gout[e] = -1;
    }
    int one = rank + 1, rep = 7000 + rank, newv = -rank - 1, cmp_ok = right * 10000 + 9;
    int cmp_fail = -12345, dummy = 0;
    OK(MPI_Win_fence(0, win));
    OK(MPI_Get_accumulate(gin, 3, MPI_INT, gout, 3, MPI_INT, 0, 0, 3, MPI_INT, MPI_SUM, win));
    OK(MPI_Fetch_and_op(&one, &fsum, MPI_INT, 0, 3, MPI_SUM, win));
    OK(MPI_Get_accumulate(NULL, 0, MPI_INT, gnop, 3, MPI_INT, right, 4, 3, MPI_INT, MPI_NO_OP,
                          win));
    OK(MPI_Fetch_and_op(&rep, &frep, MPI_INT, right, 7, MPI_REPLACE, win));
    OK(MPI_Fetch_and_op(&dummy, &fnop, MPI_INT, right, 8, MPI_NO_OP, win));
    OK(MPI_Compare_and_swap(&newv, &cmp_ok, &cas_ok, MPI_INT, right, 9, win));
    OK(MPI_Compare_and_swap(&newv, &cmp_fail, &cas_fail, MPI_INT, right, 10, win));
    OK(MPI_Win_fence(0, win));

    int tot = size * (size + 1) / 2;
    for (int e = 0; e < 3; e++) {
        char what[64];
        snprintf(what, sizeof what, "Get_accumulate SUM element %d", e);
        chain_check(gout[e], gin[e], 50, rank == 0 ? w[e] : 0, what);
        if (rank == 0)
            CHECK(w[e] == 50 + tot * (e + 1), "%s: counter %d, expected %d", what, w[e],
                  50 + tot * (e + 1));
    }
    chain_check(fsum, one, 50, rank == 0 ? w[3] : 0, "Fetch_and_op SUM");
    if (rank == 0)
        CHECK(w[3] == 50 + tot, "Fetch_and_op SUM: counter %d, expected %d", w[3], 50 + tot);
    for (int e = 0; e < 3; e++) {
        CHECK(gnop[e] == right * 10000 + 4 + e, "Get_accumulate NO_OP element %d: %d, "
              "expected %d", e, gnop[e], right * 10000 + 4 + e);
        CHECK(w[4 + e] == rank * 10000 + 4 + e, "Get_accumulate NO_OP changed element %d: %d",
              4 + e, w[4 + e]);
    }
    CHECK(frep == right * 10000 + 7 && w[7] == 7000 + left,
          "Fetch_and_op REPLACE fetched %d (expected %d), left %d (expected %d)", frep,
          right * 10000 + 7, w[7], 7000 + left);
    CHECK(fnop == right * 10000 + 8 && w[8] == rank * 10000 + 8,
          "Fetch_and_op NO_OP fetched %d (expected %d), target now %d", fnop,
          right * 10000 + 8, w[8]);
    CHECK(cas_ok == right * 10000 + 9 && w[9] == -left - 1,
          "successful CAS fetched %d (expected %d), target now %d (expected %d)", cas_ok,
          right * 10000 + 9, w[9], -left - 1);
    CHECK(cas_fail == right * 10000 + 10 && w[10] == rank * 10000 + 10,
          "failed CAS fetched %d (expected %d), target now %d (expected unchanged %d)",
          cas_fail, right * 10000 + 10, w[10], rank * 10000 + 10);
    OK(MPI_Win_free(&win));
    free(w);
}

/* ---------------------------------------------------------------- large transfers */

static unsigned char put_pat(int r, long i)
{
    return (unsigned char)(r * 131 + i * 7 + (i >> 12));
}
static unsigned char win_pat(int r, long i)
{
    return (unsigned char)(r * 17 + i * 3 + (i >> 10) + 1);
}

static void large(void)
{
    const long MIB = 1L << 20;
    unsigned char *w = NULL, *out = malloc(MIB), *in = malloc(MIB);
    CHECK(out && in, "malloc");
    MPI_Win win;
    OK(MPI_Win_allocate(2 * MIB, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win));
    for (long i = 0; i < MIB; i++) {
        w[i] = 0;
        w[MIB + i] = win_pat(rank, i);
        out[i] = put_pat(rank, i);
        in[i] = 0;
    }
    stores_done();
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(out, (int)MIB, MPI_BYTE, right, 0, (int)MIB, MPI_BYTE, win));
    OK(MPI_Get(in, (int)MIB, MPI_BYTE, right, MIB, (int)MIB, MPI_BYTE, win));
    OK(MPI_Win_fence(0, win));
    for (long i = 0; i < MIB; i++) {
        CHECK(w[i] == put_pat(left, i), "1 MiB put: byte %ld = %d, expected %d", i, w[i],
              put_pat(left, i));
        CHECK(in[i] == win_pat(right, i), "1 MiB get: byte %ld = %d, expected %d", i, in[i],
              win_pat(right, i));
    }
    OK(MPI_Win_free(&win));
    free(out);
    free(in);

    enum { ND = 100000 };
    double *d = malloc(ND * sizeof(double)), *o = malloc(ND * sizeof(double));
    CHECK(d && o, "malloc");
    for (int i = 0; i < ND; i++) {
        d[i] = i;
        o[i] = rank + 0.25 * i;
    }
    OK(MPI_Win_create(d, ND * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD,
                      &win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Accumulate(o, ND, MPI_DOUBLE, right, 0, ND, MPI_DOUBLE, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < ND; i++)
        CHECK(d[i] == i + left + 0.25 * i, "accumulate of %d doubles: element %d = %.17g, "
              "expected %.17g", ND, i, d[i], i + left + 0.25 * i);
    OK(MPI_Win_free(&win));
    free(d);
    free(o);
}

/* ---------------------------------------------------------------- derived datatypes */

static void derived(void)
{
    /* Origin: vector of 4 blocks of 2 ints, stride 3 -> elements vi[]. Target: contiguous
     * of 8 ints, or indexed blocks {3,1,4} at {0,5,9} -> elements xi[]. */
    const int vi[8] = {0, 1, 3, 4, 6, 7, 9, 10}, xi[8] = {0, 1, 2, 5, 9, 10, 11, 12};
    int bl[3] = {3, 1, 4}, dp[3] = {0, 5, 9};
    MPI_Datatype vec, con, idx;
    OK(MPI_Type_vector(4, 2, 3, MPI_INT, &vec));
    OK(MPI_Type_contiguous(8, MPI_INT, &con));
    OK(MPI_Type_indexed(3, bl, dp, MPI_INT, &idx));
    OK(MPI_Type_commit(&vec));
    OK(MPI_Type_commit(&con));
    OK(MPI_Type_commit(&idx));

    enum { N = 48, PUT = 0, GET = 16, ACC = 32 };
    int *w = malloc(N * sizeof(int));
    CHECK(w != NULL, "malloc");
    for (int i = 0; i < N; i++)
        w[i] = rank * 1000 + i;
    int src[12], dst[12], add[12];
    for (int j = 0; j < 12; j++) {
        src[j] = -(rank * 100 + j) - 1;
        dst[j] = -1;
        add[j] = rank + j * 10;
    }
    MPI_Win win;
    OK(MPI_Win_create(w, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(src, 1, vec, right, PUT, 1, con, win));
    OK(MPI_Get(dst, 1, vec, right, GET, 1, idx, win));
    OK(MPI_Accumulate(add, 1, vec, right, ACC, 1, idx, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));

    int exp[N];
    for (int i = 0; i < N; i++)
        exp[i] = rank * 1000 + i;
    for (int k = 0; k < 8; k++) {
        exp[PUT + k] = -(left * 100 + vi[k]) - 1;
        exp[ACC + xi[k]] += left + vi[k] * 10;
    }
    for (int i = 0; i < N; i++)
        CHECK(w[i] == exp[i], "derived put/accumulate: window element %d = %d, expected %d", i,
              w[i], exp[i]);
    int dexp[12];
    for (int j = 0; j < 12; j++)
        dexp[j] = -1;
    for (int k = 0; k < 8; k++)
        dexp[vi[k]] = right * 1000 + GET + xi[k];
    for (int j = 0; j < 12; j++)
        CHECK(dst[j] == dexp[j], "derived get (indexed -> vector): element %d = %d, "
              "expected %d", j, dst[j], dexp[j]);
    OK(MPI_Win_free(&win));
    OK(MPI_Type_free(&vec));
    OK(MPI_Type_free(&con));
    OK(MPI_Type_free(&idx));
    free(w);
}

/* ---------------------------------------------------------------- request-based */

static void requests(void)
{
    enum { N = 16 };
    int *w = NULL;
    MPI_Win win;
    OK(MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w,
                        &win));
    /* 0..3: Rput from the left; 4..7 read by Rget; 8,9: Raccumulate on rank 0;
     * 10: Rget_accumulate on rank 0. Initialized under an exclusive lock on myself. */
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < N; i++)
        w[i] = rank * 100 + i;
    w[8] = w[9] = w[10] = 0;
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    int out[4], in[4] = {-1, -1, -1, -1}, acc[2] = {rank + 1, 2 * (rank + 1)};
    int gacc = rank + 1, fetched = -1;
    for (int i = 0; i < 4; i++)
        out[i] = -(rank * 10 + i) - 1;
    MPI_Request r[2];
    OK(MPI_Win_lock_all(0, win));
    OK(MPI_Rput(out, 4, MPI_INT, right, 0, 4, MPI_INT, win, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(r[0] == MPI_REQUEST_NULL, "MPI_Wait did not free the MPI_Rput request");
    OK(MPI_Rget(in, 4, MPI_INT, right, 4, 4, MPI_INT, win, &r[0]));
    for (int flag = 0, spins = 0; !flag; spins++) {
        OK(MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE));
        CHECK(spins < 100000000, "MPI_Rget never completes under MPI_Test");
    }
    CHECK(r[0] == MPI_REQUEST_NULL, "MPI_Test did not free the MPI_Rget request");
    for (int i = 0; i < 4; i++)
        CHECK(in[i] == right * 100 + 4 + i, "MPI_Rget element %d = %d, expected %d", i, in[i],
              right * 100 + 4 + i);
    OK(MPI_Raccumulate(acc, 2, MPI_INT, 0, 8, 2, MPI_INT, MPI_SUM, win, &r[0]));
    OK(MPI_Rget_accumulate(&gacc, 1, MPI_INT, &fetched, 1, MPI_INT, 0, 10, 1, MPI_INT, MPI_SUM,
                           win, &r[1]));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL,
          "MPI_Waitall did not free the RMA requests");
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    int tot = size * (size + 1) / 2, got[N];
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    memcpy(got, w, sizeof got);
    OK(MPI_Win_unlock(rank, win));
    for (int i = 0; i < 4; i++)
        CHECK(got[i] == -(left * 10 + i) - 1, "MPI_Rput: element %d = %d, expected %d", i,
              got[i], -(left * 10 + i) - 1);
    if (rank == 0)
        CHECK(got[8] == tot && got[9] == 2 * tot && got[10] == tot,
              "MPI_Raccumulate/MPI_Rget_accumulate: counters %d %d %d, expected %d %d %d",
              got[8], got[9], got[10], tot, 2 * tot, tot);
    chain_check(fetched, gacc, 0, rank == 0 ? got[10] : 0, "MPI_Rget_accumulate SUM");
    OK(MPI_Win_free(&win));
}

/* ---------------------------------------------------------------- concurrent accumulate */

static void concurrent(void)
{
    enum { TIMES = 100, APART = 10 };
    int *w = malloc(4 * sizeof(int));
    CHECK(w != NULL, "malloc");
    w[0] = w[1] = w[2] = w[3] = 0;
    MPI_Win win;
    OK(MPI_Win_create(w, 4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int v = rank + 1;
    /* Most in one shared-lock epoch, the last APART with a lock each (few: every lock and
     * unlock is a round trip to rank 0, slow when the ranks outnumber the cores). */
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    for (int k = 0; k < TIMES - APART; k++)
        OK(MPI_Accumulate(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_unlock(0, win));
    for (int k = TIMES - APART; k < TIMES; k++) {
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        OK(MPI_Accumulate(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win));
        OK(MPI_Win_unlock(0, win));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int got[4];
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        memcpy(got, w, sizeof got);
        OK(MPI_Win_unlock(0, win));
        int exp = TIMES * size * (size + 1) / 2;
        CHECK(got[2] == exp && got[0] == 0 && got[1] == 0 && got[3] == 0,
              "concurrent accumulate: %d (neighbours %d %d %d), expected %d", got[2], got[0],
              got[1], got[3], exp);
    }
    OK(MPI_Win_free(&win));
    free(w);
}

/* Kestrel only (see above): an access past the end (or before the start) of the target
 * window fails with MPI_ERR_RMA_RANGE under MPI_ERRORS_RETURN and moves nothing. */
static void out_of_range(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    OK(MPI_Get_library_version(v, &len));
    if (!strstr(v, "Kestrel"))
        return;
    int w[4] = {0, 0, 0, 0};
    MPI_Win win;
    OK(MPI_Win_create(w, sizeof w, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int x[2] = {7, 7};
    OK(MPI_Win_fence(0, win));
    FAILS(MPI_ERR_RMA_RANGE, MPI_Put(x, 2, MPI_INT, right, 3, 2, MPI_INT, win));
    FAILS(MPI_ERR_RMA_RANGE, MPI_Get(x, 1, MPI_INT, right, -1, 1, MPI_INT, win));
    FAILS(MPI_ERR_RANK, MPI_Put(x, 1, MPI_INT, size, 0, 1, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 4; i++)
        CHECK(w[i] == 0, "an out-of-range put wrote element %d", i);
    OK(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    fence_put_get();
    shared();
    dynamic();
    accumulate();
    atomics();
    large();
    derived();
    requests();
    concurrent();
    out_of_range();
    test_pass("rma");
    return 0;
}
