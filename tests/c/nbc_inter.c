/*
 * Collectives on an inter-communicator made with MPI_Comm_split (even and odd world
 * ranks) and MPI_Intercomm_create, blocking and nonblocking: (I)barrier, bcast, reduce
 * (MPI_SUM and a non-commutative user operation), allreduce, gather(v), scatter(v),
 * allgather(v), alltoall(v,w), reduce_scatter(_block), every root of both groups (the
 * root passes MPI_ROOT, the rest of its group MPI_PROC_NULL, whose buffers stay untouched),
 * each result being the data of the *other* group, checked exactly. Then several
 * nonblocking ones outstanding at once, completed with MPI_Waitall. At least 3 ranks
 * (3, 4, 5 and 6 tested). On MPICH (found by MPI_Get_library_version) the nonblocking
 * broadcast from a root other than rank 0 of its group is skipped: MPICH 4.0.2 gets it
 * wrong.
 */
#include "check.h"

static MPI_Comm inter;
static int wrank, wsize, g, lr, ls,
    rs;           /* group (0 even, 1 odd), local rank/size, remote size */
static int mpich; /* running on MPICH, whose bugs are avoided */
static MPI_Datatype vec_t, mat_t;
static MPI_Op matmul_op;

typedef struct {
    int a, b, c, d;
} mat;

static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        mat r = {x[i].a * y[i].a + x[i].b * y[i].c, x[i].a * y[i].b + x[i].b * y[i].d,
                 x[i].c * y[i].a + x[i].d * y[i].c, x[i].c * y[i].b + x[i].d * y[i].d};
        y[i] = r;
    }
}

/* Element j of the data of local rank r of group gg. */
static int val(int gg, int r, int j, int salt)
{
    return (gg + 1) * 1000000 + r * 100000 + j * 3 + salt;
}

#define UNTOUCHED (-77)
static int *ibuf(int n)
{
    int *p = malloc(sizeof(int) * (n + 1));
    CHECK(p != NULL, "malloc");
    for (int i = 0; i <= n; i++)
        p[i] = UNTOUCHED;
    return p;
}

/* Runs the blocking call, or the nonblocking one and waits for it. */
#define RUN(blocking, nonblocking)                                                             \
    do {                                                                                       \
        if (nb) {                                                                              \
            MPI_Request r_;                                                                    \
            OK(MPI_##nonblocking);                                                             \
            OK(MPI_Wait(&r_, MPI_STATUS_IGNORE));                                              \
        } else {                                                                               \
            OK(MPI_##blocking);                                                                \
        }                                                                                      \
    } while (0)
#define EXPECT(buf, k, want, what)                                                             \
    CHECK((buf)[k] == (want), "%s %s: element %d is %d, expected %d",                          \
          nb ? "nonblocking" : "blocking", what, (int)(k), (buf)[k], (want))

static int gsize(int gg)
{
    return gg == g ? ls : rs;
}
/* v-variant block counts of rank r of group gg; some are 0. */
static int vc(int gg, int r, int cnt)
{
    return ((r + gg + 1) % 3) * cnt;
}

/* The root argument: rank rr of group rg is the root. */
static int root_arg(int rg, int rr)
{
    return g == rg ? (lr == rr ? MPI_ROOT : MPI_PROC_NULL) : rr;
}

static void rooted(int nb, int cnt)
{
    for (int rg = 0; rg < 2; rg++)
        for (int rr = 0; rr < gsize(rg); rr++) {
            int root = root_arg(rg, rr), salt = rg * 10 + rr, n = gsize(1 - rg);
            int *b = ibuf(cnt);
            /* Bcast: the root's data reaches the other group; the root's group is untouched. */
            for (int j = 0; j < cnt; j++)
                b[j] = root == MPI_ROOT ? val(rg, rr, j, salt) : UNTOUCHED;
            /* MPICH 4.0.2's MPI_Ibcast on an inter-communicator delivers nothing when the
             * root is not rank 0 of its group (MPI_Bcast works): skipped there. */
            if (!(nb && rr != 0 && mpich))
                RUN(Bcast(b, cnt, MPI_INT, root, inter),
                    Ibcast(b, cnt, MPI_INT, root, inter, &r_));
            for (int j = 0; j <= cnt && !(nb && rr != 0 && mpich); j++)
                EXPECT(b, j,
                       j == cnt || root == MPI_PROC_NULL ? UNTOUCHED : val(rg, rr, j, salt),
                       "bcast");
            free(b);

            /* Reduce: the root gets the sum of the other group's data. */
            int *s = ibuf(cnt), *r = ibuf(cnt);
            for (int j = 0; j < cnt; j++)
                s[j] = val(g, lr, j, salt);
            RUN(Reduce(s, r, cnt, MPI_INT, MPI_SUM, root, inter),
                Ireduce(s, r, cnt, MPI_INT, MPI_SUM, root, inter, &r_));
            /* (The senders' receive buffers are not significant: not checked.) */
            for (int j = 0; j <= cnt && g == rg; j++) {
                int want = root == MPI_ROOT && j < cnt ? 0 : UNTOUCHED;
                for (int q = 0; q < n && root == MPI_ROOT && j < cnt; q++)
                    want += val(1 - rg, q, j, salt);
                EXPECT(r, j, want, "reduce");
            }
            free(s);
            free(r);

            /* Reduce with a non-commutative operation keeps the other group's rank order. */
            mat m = {lr + g + 1, 1, 1, 0}, p = {UNTOUCHED, UNTOUCHED, UNTOUCHED, UNTOUCHED};
            RUN(Reduce(&m, &p, 1, mat_t, matmul_op, root, inter),
                Ireduce(&m, &p, 1, mat_t, matmul_op, root, inter, &r_));
            if (root == MPI_ROOT) {
                mat w = {1 - rg + 1, 1, 1, 0};
                for (int q = 1; q < n; q++) {
                    mat x = {q + 1 - rg + 1, 1, 1, 0}, acc = w;
                    int len = 1;
                    matmul(&acc, &x, &len, NULL);
                    w = x;
                }
                CHECK(p.a == w.a && p.b == w.b && p.c == w.c && p.d == w.d,
                      "%s matrix reduce: {%d %d %d %d}, expected {%d %d %d %d}",
                      nb ? "nonblocking" : "blocking", p.a, p.b, p.c, p.d, w.a, w.b, w.c, w.d);
            } else if (g == rg) {
                CHECK(p.a == UNTOUCHED, "matrix reduce wrote at MPI_PROC_NULL");
            }

            /* Gather: the root gets one block from each process of the other group. */
            s = ibuf(cnt);
            r = ibuf(n * cnt);
            for (int j = 0; j < cnt; j++)
                s[j] = val(g, lr, j, salt);
            RUN(Gather(s, cnt, MPI_INT, r, cnt, MPI_INT, root, inter),
                Igather(s, cnt, MPI_INT, r, cnt, MPI_INT, root, inter, &r_));
            for (int k = 0; k <= n * cnt && g == rg; k++)
                EXPECT(r, k,
                       root == MPI_ROOT && k < n * cnt ? val(1 - rg, k / cnt, k % cnt, salt)
                                                       : UNTOUCHED,
                       "gather");
            free(r);

            /* Scatter: block q of the root's buffer goes to rank q of the other group. */
            int *all = ibuf(n * cnt);
            for (int k = 0; k < n * cnt; k++)
                all[k] = val(rg, rr, k, salt);
            r = ibuf(cnt);
            RUN(Scatter(all, cnt, MPI_INT, r, cnt, MPI_INT, root, inter),
                Iscatter(all, cnt, MPI_INT, r, cnt, MPI_INT, root, inter, &r_));
            for (int j = 0; j <= cnt; j++)
                EXPECT(r, j, g != rg && j < cnt ? val(rg, rr, lr * cnt + j, salt) : UNTOUCHED,
                       "scatter");
            free(r);
            free(all);
            free(s);

            /* Gatherv/Scatterv: varying blocks, placed in reverse order with gaps. */
            int *cn = malloc(sizeof(int) * n), *dp = malloc(sizeof(int) * n), tot = 0;
            for (int q = n - 1; q >= 0; q--) {
                cn[q] = vc(1 - rg, q, cnt);
                dp[q] = tot;
                tot += cn[q] + 1;
            }
            int mine = g == rg ? 0 : vc(g, lr, cnt);
            s = ibuf(mine);
            for (int j = 0; j < mine; j++)
                s[j] = val(g, lr, j, salt);
            r = ibuf(tot);
            RUN(Gatherv(s, mine, MPI_INT, r, cn, dp, MPI_INT, root, inter),
                Igatherv(s, mine, MPI_INT, r, cn, dp, MPI_INT, root, inter, &r_));
            for (int q = 0; q < n && root == MPI_ROOT; q++)
                for (int j = 0; j < cn[q]; j++)
                    EXPECT(r, dp[q] + j, val(1 - rg, q, j, salt), "gatherv");
            for (int q = 0; q < n && g == rg; q++)
                EXPECT(r, dp[q] + cn[q], UNTOUCHED, "gatherv gap");
            if (root == MPI_PROC_NULL)
                EXPECT(r, 0, UNTOUCHED, "gatherv at MPI_PROC_NULL");
            all = ibuf(tot);
            for (int k = 0; k < tot; k++)
                all[k] = val(rg, rr, k, salt);
            free(s);
            s = ibuf(mine);
            RUN(Scatterv(all, cn, dp, MPI_INT, s, mine, MPI_INT, root, inter),
                Iscatterv(all, cn, dp, MPI_INT, s, mine, MPI_INT, root, inter, &r_));
            for (int j = 0; j <= mine; j++)
                EXPECT(s, j, j < mine ? val(rg, rr, dp[lr] + j, salt) : UNTOUCHED, "scatterv");
            free(all);
            free(s);
            free(r);
            free(cn);
            free(dp);
        }
}

static void allcoll(int nb, int cnt, int salt)
{
    /* Allreduce: each group gets the other group's sum, and its matrix product. */
    int *s = ibuf(cnt), *r = ibuf(cnt);
    for (int j = 0; j < cnt; j++)
        s[j] = val(g, lr, j, salt);
    RUN(Allreduce(s, r, cnt, MPI_INT, MPI_SUM, inter),
        Iallreduce(s, r, cnt, MPI_INT, MPI_SUM, inter, &r_));
    for (int j = 0; j < cnt; j++) {
        int want = 0;
        for (int q = 0; q < rs; q++)
            want += val(1 - g, q, j, salt);
        EXPECT(r, j, want, "allreduce");
    }
    EXPECT(r, cnt, UNTOUCHED, "allreduce end");
    mat m = {lr + 2, 1, 1, 0}, p;
    RUN(Allreduce(&m, &p, 1, mat_t, matmul_op, inter),
        Iallreduce(&m, &p, 1, mat_t, matmul_op, inter, &r_));
    mat w = {2, 1, 1, 0};
    for (int q = 1; q < rs; q++) {
        mat x = {q + 2, 1, 1, 0};
        int len = 1;
        matmul(&w, &x, &len, NULL);
        w = x;
    }
    CHECK(p.a == w.a && p.b == w.b && p.c == w.c && p.d == w.d,
          "matrix allreduce {%d %d %d %d}", p.a, p.b, p.c, p.d);
    free(r);

    /* Allgather: the other group's blocks. */
    r = ibuf(rs * cnt);
    RUN(Allgather(s, cnt, MPI_INT, r, cnt, MPI_INT, inter),
        Iallgather(s, cnt, MPI_INT, r, cnt, MPI_INT, inter, &r_));
    for (int k = 0; k <= rs * cnt; k++)
        EXPECT(r, k, k < rs * cnt ? val(1 - g, k / cnt, k % cnt, salt) : UNTOUCHED,
               "allgather");
    free(r);
    free(s);

    /* Allgatherv: varying blocks in reverse order with gaps. */
    int *cn = malloc(sizeof(int) * rs), *dp = malloc(sizeof(int) * rs), tot = 0;
    for (int q = rs - 1; q >= 0; q--) {
        cn[q] = vc(1 - g, q, cnt);
        dp[q] = tot;
        tot += cn[q] + 1;
    }
    int mine = vc(g, lr, cnt);
    s = ibuf(mine);
    for (int j = 0; j < mine; j++)
        s[j] = val(g, lr, j, salt);
    r = ibuf(tot);
    RUN(Allgatherv(s, mine, MPI_INT, r, cn, dp, MPI_INT, inter),
        Iallgatherv(s, mine, MPI_INT, r, cn, dp, MPI_INT, inter, &r_));
    for (int q = 0; q < rs; q++) {
        for (int j = 0; j < cn[q]; j++)
            EXPECT(r, dp[q] + j, val(1 - g, q, j, salt), "allgatherv");
        EXPECT(r, dp[q] + cn[q], UNTOUCHED, "allgatherv gap");
    }
    free(s);
    free(r);
    free(cn);
    free(dp);

    /* Alltoall: block d goes to rank d of the other group. */
    s = ibuf(rs * cnt);
    r = ibuf(rs * cnt);
    for (int k = 0; k < rs * cnt; k++)
        s[k] = val(g, lr, k, salt);
    RUN(Alltoall(s, cnt, MPI_INT, r, cnt, MPI_INT, inter),
        Ialltoall(s, cnt, MPI_INT, r, cnt, MPI_INT, inter, &r_));
    for (int k = 0; k <= rs * cnt; k++)
        EXPECT(r, k, k < rs * cnt ? val(1 - g, k / cnt, lr * cnt + k % cnt, salt) : UNTOUCHED,
               "alltoall");
    free(s);
    free(r);

    /* Alltoallv: (g, s) sends ((s + 2d + g) % 3) * cnt to (other group, d). */
    int *sc = malloc(sizeof(int) * rs), *sd = malloc(sizeof(int) * rs);
    int *rc = malloc(sizeof(int) * rs), *rd = malloc(sizeof(int) * rs), stot = 0, rtot = 0;
    for (int d = 0; d < rs; d++) {
        sc[d] = ((lr + 2 * d + g) % 3) * cnt;
        sd[d] = stot;
        stot += sc[d] + 1;
    }
    for (int q = rs - 1; q >= 0; q--) {
        rc[q] = ((q + 2 * lr + 1 - g) % 3) * cnt;
        rd[q] = rtot;
        rtot += rc[q] + 1;
    }
    s = ibuf(stot);
    r = ibuf(rtot);
    for (int k = 0; k < stot; k++)
        s[k] = val(g, lr, k, salt);
    RUN(Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, inter),
        Ialltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, inter, &r_));
    for (int q = 0; q < rs; q++) {
        int from = 0; /* where rank q of the other group keeps its block for me */
        for (int d = 0; d < lr; d++)
            from += ((q + 2 * d + 1 - g) % 3) * cnt + 1;
        for (int j = 0; j < rc[q]; j++)
            EXPECT(r, rd[q] + j, val(1 - g, q, from + j, salt), "alltoallv");
        EXPECT(r, rd[q] + rc[q], UNTOUCHED, "alltoallv gap");
    }
    free(s);
    free(r);

    /* Alltoallw: 2*cnt ints to each peer, as a vector type to odd peers (byte displacements);
     * received as ints. */
    MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * rs),
                 *rt = malloc(sizeof(MPI_Datatype) * rs);
    stot = rtot = 0;
    for (int d = 0; d < rs; d++) {
        sc[d] = d % 2 ? cnt : 2 * cnt;
        st[d] = d % 2 ? vec_t : MPI_INT;
        sd[d] = stot * (int)sizeof(int);
        stot += (d % 2 ? 3 * cnt : 2 * cnt) + 1;
        rc[d] = 2 * cnt;
        rt[d] = MPI_INT;
        rd[d] = (rs - 1 - d) * (2 * cnt + 1) * (int)sizeof(int);
    }
    rtot = rs * (2 * cnt + 1);
    s = ibuf(stot);
    r = ibuf(rtot);
    for (int k = 0; k < stot; k++)
        s[k] = val(g, lr, k, salt);
    RUN(Alltoallw(s, sc, sd, st, r, rc, rd, rt, inter),
        Ialltoallw(s, sc, sd, st, r, rc, rd, rt, inter, &r_));
    for (int q = 0; q < rs; q++) {
        int from = 0;
        for (int d = 0; d < lr; d++)
            from += (d % 2 ? 3 * cnt : 2 * cnt) + 1;
        for (int k = 0; k < 2 * cnt; k++)
            EXPECT(r, rd[q] / (int)sizeof(int) + k,
                   val(1 - g, q, from + (lr % 2 ? k / 2 * 3 + k % 2 * 2 : k), salt),
                   "alltoallw");
        EXPECT(r, rd[q] / (int)sizeof(int) + 2 * cnt, UNTOUCHED, "alltoallw gap");
    }
    free(s);
    free(r);
    free(st);
    free(rt);
    free(sc);
    free(sd);
    free(rc);
    free(rd);

    /* Reduce_scatter: the other group's vectors of T elements are summed and scattered
     * over this group by recvcounts (the same T in both groups). */
    int T = 6 * cnt + 1, off = 0;
    int *cnts = malloc(sizeof(int) * ls);
    for (int q = 0; q < ls; q++) {
        cnts[q] = T / ls + (q < T % ls);
        if (q < lr)
            off += cnts[q];
    }
    s = ibuf(T);
    for (int k = 0; k < T; k++)
        s[k] = val(g, lr, k, salt);
    r = ibuf(cnts[lr]);
    RUN(Reduce_scatter(s, r, cnts, MPI_INT, MPI_SUM, inter),
        Ireduce_scatter(s, r, cnts, MPI_INT, MPI_SUM, inter, &r_));
    for (int j = 0; j <= cnts[lr]; j++) {
        int want = j == cnts[lr] ? UNTOUCHED : 0;
        for (int q = 0; q < rs && j < cnts[lr]; q++)
            want += val(1 - g, q, off + j, salt);
        EXPECT(r, j, want, "reduce_scatter");
    }
    free(s);
    free(r);
    free(cnts);

    /* Reduce_scatter_block: ls * rcount elements per process, equal in both groups. */
    int rcount = cnt * rs, n = ls * rcount;
    s = ibuf(n);
    for (int k = 0; k < n; k++)
        s[k] = val(g, lr, k, salt);
    r = ibuf(rcount);
    RUN(Reduce_scatter_block(s, r, rcount, MPI_INT, MPI_SUM, inter),
        Ireduce_scatter_block(s, r, rcount, MPI_INT, MPI_SUM, inter, &r_));
    for (int j = 0; j <= rcount; j++) {
        int want = j == rcount ? UNTOUCHED : 0;
        for (int q = 0; q < rs && j < rcount; q++)
            want += val(1 - g, q, lr * rcount + j, salt);
        EXPECT(r, j, want, "reduce_scatter_block");
    }
    free(s);
    free(r);

    RUN(Barrier(inter), Ibarrier(inter, &r_));
}

/* Several nonblocking collectives outstanding at once, completed together. */
static void outstanding(void)
{
    int cnt = 100, nb = 1;
    int *a = ibuf(cnt), *sum = ibuf(cnt), *bc = ibuf(cnt), *as = ibuf(rs * cnt);
    int *ga = ibuf(rs * cnt), *ag = ibuf(rs * cnt), *at = ibuf(rs * cnt);
    MPI_Request q[6];
    MPI_Status sts[6];
    for (int j = 0; j < cnt; j++)
        a[j] = val(g, lr, j, 3);
    for (int k = 0; k < rs * cnt; k++)
        as[k] = val(g, lr, k, 4);
    /* Rank 0 of group 0 broadcasts to group 1 and gathers from it. */
    int root = root_arg(0, 0);
    for (int j = 0; j <= cnt; j++)
        bc[j] = root == MPI_ROOT && j < cnt ? val(0, 0, j, 5) : UNTOUCHED;
    OK(MPI_Ibcast(bc, cnt, MPI_INT, root, inter, &q[0]));
    OK(MPI_Iallreduce(a, sum, cnt, MPI_INT, MPI_SUM, inter, &q[1]));
    OK(MPI_Igather(a, cnt, MPI_INT, ga, cnt, MPI_INT, root, inter, &q[2]));
    OK(MPI_Iallgather(a, cnt, MPI_INT, ag, cnt, MPI_INT, inter, &q[3]));
    OK(MPI_Ialltoall(as, cnt, MPI_INT, at, cnt, MPI_INT, inter, &q[4]));
    OK(MPI_Ibarrier(inter, &q[5]));
    OK(MPI_Waitall(6, q, sts));
    for (int j = 0; j < cnt; j++) {
        int want = 0;
        for (int r = 0; r < rs; r++)
            want += val(1 - g, r, j, 3);
        EXPECT(sum, j, want, "outstanding allreduce");
        EXPECT(bc, j, root == MPI_PROC_NULL ? UNTOUCHED : val(0, 0, j, 5), "outstanding bcast");
    }
    for (int k = 0; k <= rs * cnt; k++) {
        int want = k < rs * cnt ? val(1 - g, k / cnt, k % cnt, 3) : UNTOUCHED;
        if (g == 0)
            EXPECT(ga, k, root == MPI_ROOT ? want : UNTOUCHED, "outstanding gather");
        EXPECT(ag, k, want, "outstanding allgather");
        EXPECT(at, k, k < rs * cnt ? val(1 - g, k / cnt, lr * cnt + k % cnt, 4) : UNTOUCHED,
               "outstanding alltoall");
    }
    free(a);
    free(sum);
    free(bc);
    free(as);
    free(ga);
    free(ag);
    free(at);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK(wsize >= 3, "needs at least 3 ranks, has %d", wsize);
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec_t));
    OK(MPI_Type_commit(&vec_t));
    OK(MPI_Type_contiguous(4, MPI_INT, &mat_t));
    OK(MPI_Type_commit(&mat_t));
    OK(MPI_Op_create(matmul, 0, &matmul_op));
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    OK(MPI_Get_library_version(version, &vlen));
    mpich = strncmp(version, "MPICH", 5) == 0;

    MPI_Comm local;
    g = wrank % 2;
    OK(MPI_Comm_split(MPI_COMM_WORLD, g, wrank, &local));
    /* Local leaders: world ranks 0 and 1. */
    OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - g, 42, &inter));
    int flag = 0;
    OK(MPI_Comm_test_inter(inter, &flag));
    OK(MPI_Comm_rank(inter, &lr));
    OK(MPI_Comm_size(inter, &ls));
    OK(MPI_Comm_remote_size(inter, &rs));
    CHECK(flag && lr == wrank / 2 && ls == (wsize + 1 - g) / 2 && rs == (wsize + g) / 2,
          "inter-communicator: inter %d rank %d size %d remote %d", flag, lr, ls, rs);

    for (int nb = 0; nb < 2; nb++) {
        rooted(nb, 1);
        rooted(nb, 1000);
        allcoll(nb, 1, 7);
        allcoll(nb, 1000, 8);
    }
    outstanding();

    OK(MPI_Comm_free(&inter));
    OK(MPI_Comm_free(&local));
    OK(MPI_Op_free(&matmul_op));
    OK(MPI_Type_free(&vec_t));
    OK(MPI_Type_free(&mat_t));
    test_pass("nbc_inter");
    return 0;
}
