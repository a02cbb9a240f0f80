/*
 * MPI-4 persistent collectives: MPI_Barrier_init, Bcast_init, Reduce_init (MPI_SUM, and a
 * non-commutative user operation), Allreduce_init (in place, with an MPI_Info),
 * Gather(v)_init, Scatter(v)_init, Allgather(v)_init, Alltoall(v,w)_init,
 * Reduce_scatter(_block)_init, Scan_init, Exscan_init, all initialized once and started
 * five times with new data each time (MPI_Startall, MPI_Start one by one), completed with
 * MPI_Waitall, MPI_Wait, MPI_Test, MPI_Testall or MPI_Waitany, with a blocking and a
 * nonblocking collective on the same communicator between the start and the completion;
 * the requests stay allocated and inactive between starts (MPI_Test on an inactive
 * request gives flag true and an empty status) and are freed with MPI_Request_free while
 * inactive. On MPI_COMM_WORLD and on a split communicator whose rank order is reversed.
 * Any number of ranks (1-6 tested). MPICH 4.0.2 has bugs here that the test avoids when
 * it runs on MPICH (found by MPI_Get_library_version): see "mpich" below.
 */
#include "check.h"

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
static mat mat_of(int r, int it)
{
    return (mat){r + it + 1, 1, 1, 0};
}

/* Rank r's element j in iteration it. */
static int v(int r, int j, int it)
{
    return r * 1000 + j * 7 + it * 100000 + 1;
}

#define CNT 5
#define NREQ 18
#define X (-9)

static int *ints(int n)
{
    int *p = malloc(sizeof(int) * (n + 1));
    CHECK(p != NULL, "malloc");
    return p;
}
static void clear(int *p, int n)
{
    for (int i = 0; i <= n; i++)
        p[i] = X;
}

/* MPICH 4.0.2's MPI_Gather_init, MPI_Scatter_init and MPI_Allgather_init are broken (wrong
 * data, wrong data after the first start, or errors when restarted), so on MPICH (found by
 * MPI_Get_library_version) those three are initialized and freed but each start is
 * replaced by the same nonblocking collective, which proves this test's checks of them. */
static int mpich;
enum { GATHER = 5, SCATTER = 7, ALLGATHER = 9 };
static int substituted(int k)
{
    return mpich && (k == GATHER || k == SCATTER || k == ALLGATHER);
}

static void run(MPI_Comm comm, const char *where, MPI_Op matop, MPI_Datatype mat_t)
{
    int me, n;
    OK(MPI_Comm_rank(comm, &me));
    OK(MPI_Comm_size(comm, &n));
    int last = n - 1, mid = n / 2;
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "kestrel_test_hint", "ignored"));

    /* Buffers, sized once: persistent requests keep their buffer addresses. */
    int *bc = ints(CNT), *rs = ints(CNT), *rr = ints(CNT), *ar = ints(CNT);
    int *gs = ints(CNT), *gr = ints(n * CNT), *ss = ints(n * CNT), *sr = ints(CNT);
    int *ags = ints(CNT), *agr = ints(n * CNT), *ats = ints(n * CNT), *atr = ints(n * CNT);
    int *scs = ints(CNT), *scr = ints(CNT), *exr = ints(CNT), *rsbs = ints(n * CNT),
        *rsbr = ints(CNT);
    /* v-variants: rank r has r % 3 + 1 elements; blocks in reverse order with gaps. */
    int *vc = ints(n), *vd = ints(n), vt = 0;
    for (int r = n - 1; r >= 0; r--) {
        vc[r] = r % 3 + 1;
        vd[r] = vt;
        vt += vc[r] + 1;
    }
    int *gvs = ints(vc[me]), *gvr = ints(vt), *svs = ints(vt), *svr = ints(vc[me]);
    int *agvs = ints(vc[me]), *agvr = ints(vt);
    /* Alltoallv: (me + d) % 3 + 1 elements from me to d; alltoallw the same in bytes. */
    int *ac = ints(n), *ad = ints(n), *rc = ints(n), *rd = ints(n), at = 0, rt = 0;
    for (int d = 0; d < n; d++) {
        ac[d] = (me + 2 * d) % 3 + 1;
        ad[d] = at;
        at += ac[d];
        rc[d] = (d + 2 * me) % 3 + 1;
        rd[d] = rt;
        rt += rc[d];
    }
    int *avs = ints(at), *avr = ints(rt), *aws = ints(at), *awr = ints(rt);
    int *adb = ints(n), *rdb = ints(n);
    MPI_Datatype *tw = malloc(sizeof(MPI_Datatype) * n);
    for (int d = 0; d < n; d++) {
        adb[d] = ad[d] * (int)sizeof(int);
        rdb[d] = rd[d] * (int)sizeof(int);
        tw[d] = MPI_INT;
    }
    /* Reduce_scatter: rank r gets r % 2 + 1 elements. */
    int *rsc = ints(n), rst = 0, off = 0;
    for (int r = 0; r < n; r++) {
        rsc[r] = r % 2 + 1;
        if (r < me)
            off += rsc[r];
        rst += rsc[r];
    }
    int *rscs = ints(rst), *rscr = ints(rsc[me]);
    mat m, mp;

    MPI_Request pq[NREQ], q[NREQ];
    int k = 0;
    OK(MPI_Barrier_init(comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Bcast_init(bc, CNT, MPI_INT, last, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Reduce_init(rs, rr, CNT, MPI_INT, MPI_SUM, 0, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Reduce_init(&m, &mp, 1, mat_t, matop, last, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Allreduce_init(MPI_IN_PLACE, ar, CNT, MPI_INT, MPI_MAX, comm, info, &pq[k++]));
    OK(MPI_Gather_init(gs, CNT, MPI_INT, gr, CNT, MPI_INT, mid, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Gatherv_init(gvs, vc[me], MPI_INT, gvr, vc, vd, MPI_INT, last, comm, MPI_INFO_NULL,
                        &pq[k++]));
    OK(MPI_Scatter_init(ss, CNT, MPI_INT, sr, CNT, MPI_INT, 0, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Scatterv_init(svs, vc, vd, MPI_INT, svr, vc[me], MPI_INT, mid, comm, MPI_INFO_NULL,
                         &pq[k++]));
    OK(MPI_Allgather_init(ags, CNT, MPI_INT, agr, CNT, MPI_INT, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Allgatherv_init(agvs, vc[me], MPI_INT, agvr, vc, vd, MPI_INT, comm, MPI_INFO_NULL,
                           &pq[k++]));
    OK(MPI_Alltoall_init(ats, CNT, MPI_INT, atr, CNT, MPI_INT, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Alltoallv_init(avs, ac, ad, MPI_INT, avr, rc, rd, MPI_INT, comm, MPI_INFO_NULL,
                          &pq[k++]));
    OK(MPI_Alltoallw_init(aws, ac, adb, tw, awr, rc, rdb, tw, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Reduce_scatter_init(rscs, rscr, rsc, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL,
                               &pq[k++]));
    OK(MPI_Reduce_scatter_block_init(rsbs, rsbr, CNT, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL,
                                     &pq[k++]));
    OK(MPI_Scan_init(scs, scr, CNT, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &pq[k++]));
    OK(MPI_Exscan_init(scs, exr, CNT, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &pq[k++]));
    CHECK(k == NREQ, "%d requests", k);
    OK(MPI_Info_free(&info));

    for (int it = 0; it < 5; it++) {
        /* New data for this start. */
        for (int j = 0; j < CNT; j++) {
            bc[j] = me == last ? v(last, j, it) : X;
            rs[j] = gs[j] = ags[j] = scs[j] = v(me, j, it);
            ar[j] = v(me, j, it) * (me % 2 ? -1 : 1);
        }
        clear(rr, CNT);
        clear(gr, n * CNT);
        clear(sr, CNT);
        clear(agr, n * CNT);
        clear(atr, n * CNT);
        clear(scr, CNT);
        clear(exr, CNT);
        clear(rsbr, CNT);
        clear(gvr, vt);
        clear(svr, vc[me]);
        clear(agvr, vt);
        clear(avr, rt);
        clear(awr, rt);
        clear(rscr, rsc[me]);
        for (int i = 0; i < n * CNT; i++) {
            ss[i] = v(i / CNT, i % CNT, it) + 50; /* block d for rank d */
            ats[i] = v(me, i, it);
            rsbs[i] = v(me, i, it);
        }
        for (int j = 0; j < vc[me]; j++)
            gvs[j] = agvs[j] = v(me, j, it);
        for (int r = 0; r < n; r++)
            for (int j = 0; j <= vc[r]; j++)
                svs[vd[r] + j] = j < vc[r] ? v(r, j, it) + 60 : X;
        for (int i = 0; i < at; i++)
            avs[i] = aws[i] = v(me, i, it);
        for (int i = 0; i < rst; i++)
            rscs[i] = v(me, i, it);
        m = mat_of(me, it);
        mp = (mat){X, X, X, X};

        /* Start: all at once, or one by one in order. */
        MPI_Request act[NREQ];
        int na = 0;
        for (int i = 0; i < NREQ; i++) {
            q[i] = pq[i];
            if (!substituted(i))
                act[na++] = pq[i];
        }
        if (it % 2 == 0)
            OK(MPI_Startall(na, act));
        for (int i = 0; i < NREQ; i++) {
            if (substituted(i) && i == GATHER)
                OK(MPI_Igather(gs, CNT, MPI_INT, gr, CNT, MPI_INT, mid, comm, &q[i]));
            else if (substituted(i) && i == SCATTER)
                OK(MPI_Iscatter(ss, CNT, MPI_INT, sr, CNT, MPI_INT, 0, comm, &q[i]));
            else if (substituted(i))
                OK(MPI_Iallgather(ags, CNT, MPI_INT, agr, CNT, MPI_INT, comm, &q[i]));
            else if (it % 2)
                OK(MPI_Start(&q[i]));
        }
        /* Other collectives on the same communicator while these are active. */
        int one = 1, total = 0, b = me == 0 ? 4242 + it : -1;
        MPI_Request ib;
        OK(MPI_Ibcast(&b, 1, MPI_INT, 0, comm, &ib));
        OK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, comm));
        OK(MPI_Wait(&ib, MPI_STATUS_IGNORE));
        CHECK(total == n && b == 4242 + it, "%s: collectives among persistent ones: %d %d",
              where, total, b);
        /* Completion. MPICH 4.0.2 gets MPI_Testall (MPI_ERR_IN_STATUS, or a hang), Testany,
         * Testsome, Waitany (completion reported before the data arrived) and Waitsome (a
         * crash) wrong on persistent collectives: there, Waitall and a Test loop instead. */
        MPI_Status sts[NREQ];
        int how = mpich && it >= 3 ? it - 3 : it;
        if (how == 0) {
            OK(MPI_Waitall(NREQ, q, sts));
        } else if (how == 1) {
            for (int i = NREQ - 1; i >= 0; i--)
                OK(MPI_Wait(&q[i], MPI_STATUS_IGNORE));
        } else if (how == 2) {
            for (int done = 0; done < NREQ;)
                for (int i = done = 0, flag; i < NREQ; i++) {
                    OK(MPI_Test(&q[i], &flag, MPI_STATUS_IGNORE));
                    done += flag;
                }
        } else if (how == 3) {
            int done = 0;
            while (!done)
                OK(MPI_Testall(NREQ, q, &done, sts));
        } else {
            int idx = 0;
            for (int i = 0; i < NREQ; i++) {
                OK(MPI_Waitany(NREQ, q, &idx, sts));
                CHECK(idx != MPI_UNDEFINED, "%s: Waitany ran out at %d", where, i);
                /* A persistent request stays and is inactive now: skip it from now on. */
                if (q[idx] != MPI_REQUEST_NULL) {
                    pq[idx] = q[idx];
                    q[idx] = MPI_REQUEST_NULL;
                }
            }
            for (int i = 0; i < NREQ; i++)
                q[i] = substituted(i) ? MPI_REQUEST_NULL : pq[i];
        }
        for (int i = 0; i < NREQ; i++) {
            if (substituted(i)) {
                CHECK(q[i] == MPI_REQUEST_NULL, "%s: nonblocking request %d not freed", where,
                      i);
                continue;
            }
            CHECK(q[i] == pq[i], "%s: persistent request %d freed by completion", where, i);
            /* Inactive: MPI_Test gives flag true and an empty status. */
            int flag = 0;
            MPI_Status st;
            st.MPI_SOURCE = 77;
            st.MPI_TAG = 77;
            OK(MPI_Test(&q[i], &flag, &st));
            CHECK(flag && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG,
                  "%s: MPI_Test on inactive request %d: flag %d source %d tag %d", where, i,
                  flag, st.MPI_SOURCE, st.MPI_TAG);
        }

        /* Check everything against a serial computation. */
#define EQ(buf, i, want, what)                                                                 \
    CHECK((buf)[i] == (want), "%s iteration %d %s[%d] = %d, expected %d", where, it, what,     \
          (int)(i), (buf)[i], (want))
        for (int j = 0; j < CNT; j++) {
            int sum = 0, mx = -1 << 30, pre = 0;
            for (int r = 0; r < n; r++) {
                int x = v(r, j, it) * (r % 2 ? -1 : 1);
                mx = x > mx ? x : mx;
                sum += v(r, j, it);
                if (r < me)
                    pre += v(r, j, it);
            }
            EQ(bc, j, v(last, j, it), "bcast");
            if (me == 0)
                EQ(rr, j, sum, "reduce");
            EQ(ar, j, mx, "allreduce in place");
            EQ(sr, j, v(me, j, it) + 50, "scatter");
            EQ(scr, j, pre + v(me, j, it), "scan");
            if (me > 0)
                EQ(exr, j, pre, "exscan");
            int rsb = 0;
            for (int r = 0; r < n; r++)
                rsb += v(r, me * CNT + j, it);
            EQ(rsbr, j, rsb, "reduce_scatter_block");
        }
        EQ(scr, CNT, X, "scan end");
        EQ(sr, CNT, X, "scatter end");
        for (int i = 0; i < n * CNT; i++) {
            if (me == mid)
                EQ(gr, i, v(i / CNT, i % CNT, it), "gather");
            EQ(agr, i, v(i / CNT, i % CNT, it), "allgather");
            EQ(atr, i, v(i / CNT, me * CNT + i % CNT, it), "alltoall");
        }
        for (int r = 0; r < n; r++)
            for (int j = 0; j <= vc[r]; j++) {
                int want = j < vc[r] ? v(r, j, it) : X;
                if (me == last)
                    EQ(gvr, vd[r] + j, want, "gatherv");
                EQ(agvr, vd[r] + j, want, "allgatherv");
            }
        for (int j = 0; j <= vc[me]; j++)
            EQ(svr, j, j < vc[me] ? v(me, j, it) + 60 : X, "scatterv");
        for (int s = 0; s < n; s++) {
            int from = 0; /* where rank s keeps its block for me */
            for (int d = 0; d < me; d++)
                from += (s + 2 * d) % 3 + 1;
            for (int j = 0; j < rc[s]; j++) {
                EQ(avr, rd[s] + j, v(s, from + j, it), "alltoallv");
                EQ(awr, rd[s] + j, v(s, from + j, it), "alltoallw");
            }
        }
        for (int j = 0; j <= rsc[me]; j++) {
            int want = j < rsc[me] ? 0 : X;
            for (int r = 0; r < n && j < rsc[me]; r++)
                want += v(r, off + j, it);
            EQ(rscr, j, want, "reduce_scatter");
        }
        if (me == last) {
            mat w = mat_of(0, it);
            for (int r = 1; r < n; r++) {
                mat x = mat_of(r, it);
                int len = 1;
                matmul(&w, &x, &len, NULL);
                w = x;
            }
            CHECK(mp.a == w.a && mp.b == w.b && mp.c == w.c && mp.d == w.d,
                  "%s iteration %d: matrix reduce {%d %d %d %d}", where, it, mp.a, mp.b, mp.c,
                  mp.d);
        }
#undef EQ
    }

    /* Freeing inactive persistent requests. */
    for (int i = 0; i < NREQ; i++) {
        OK(MPI_Request_free(&pq[i]));
        CHECK(pq[i] == MPI_REQUEST_NULL, "%s: freed request %d is not MPI_REQUEST_NULL", where,
              i);
    }
    /* One that is never started is inactive too (MPICH 4.0.2's MPI_Test says it is not
     * complete: not checked there). */
    MPI_Request never;
    OK(MPI_Allreduce_init(rs, rr, CNT, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &never));
    if (!mpich) {
        int flag = 0;
        MPI_Status st;
        OK(MPI_Test(&never, &flag, &st));
        CHECK(flag && never != MPI_REQUEST_NULL, "%s: MPI_Test on a never started request",
              where);
    }
    OK(MPI_Request_free(&never));
    OK(MPI_Barrier(comm));

    int *all[] = {bc,  rs,  rr,   ar,   gs,  gr,  ss,  sr,  ags, agr, ats,  atr,  scs,
                  scr, exr, rsbs, rsbr, vc,  vd,  gvs, gvr, svs, svr, agvs, agvr, ac,
                  ad,  rc,  rd,   avs,  avr, aws, awr, adb, rdb, rsc, rscs, rscr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(tw);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Op matop;
    MPI_Datatype mat_t;
    OK(MPI_Op_create(matmul, 0, &matop));
    OK(MPI_Type_contiguous(4, MPI_INT, &mat_t));
    OK(MPI_Type_commit(&mat_t));
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    OK(MPI_Get_library_version(version, &vlen));
    mpich = strncmp(version, "MPICH", 5) == 0;
    run(MPI_COMM_WORLD, "world", matop, mat_t);
    MPI_Comm split;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &split));
    run(split, "split", matop, mat_t);
    OK(MPI_Comm_free(&split));
    OK(MPI_Op_free(&matop));
    OK(MPI_Type_free(&mat_t));
    test_pass("persistent_coll");
    return 0;
}
