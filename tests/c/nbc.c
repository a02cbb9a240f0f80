/*
 * Nonblocking collectives (MPI-3): MPI_Ibarrier, Ibcast, Ireduce, Iallreduce, Igather(v),
 * Iscatter(v), Iallgather(v), Ialltoall(v,w), Ireduce_scatter(_block), Iscan, Iexscan on
 * MPI_COMM_WORLD and on a split communicator whose rank order is reversed. Every result
 * is compared with a serial reference computed here, and a seventh of the cases (at
 * least one of each collective) also run through the blocking collective, checked the
 * same way (blocking collectives are slow on MPICH when ranks outnumber cores). Cases:
 * every root (count 1), MPI_IN_PLACE wherever MPI allows it, counts 0, 1, 1000 and
 * 100000 (0 and 100000 on MPI_COMM_WORLD only, 100000 for some collectives), blocks of
 * varying size with gaps for the v/w-variants, types int, double, a vector type with
 * gaps (left untouched), MPI_DOUBLE_INT and a 4-int struct; operations MPI_SUM, MAX,
 * PROD, BXOR, MINLOC, a user-defined non-commutative 2x2 matrix product and a
 * commutative user sum on the vector type. Nonblocking cases run 20 at a time,
 * interleaved with point-to-point traffic on the same communicator (a wildcard receive
 * included), and are completed with Waitall, Waitany, Waitsome, Testany, Testsome, Test
 * or Wait in a scrambled order. Ibarrier must not complete before the last rank enters
 * it. Any number of ranks (1-6 tested). On MPICH (found by MPI_Get_library_version) two
 * MPICH 4.0.2 bugs are avoided: see mpich below.
 */
#include "check.h"
#include <stddef.h>
#include <stdint.h>

enum {
    K_BARRIER,
    K_BCAST,
    K_REDUCE,
    K_ALLREDUCE,
    K_GATHER,
    K_GATHERV,
    K_SCATTER,
    K_SCATTERV,
    K_ALLGATHER,
    K_ALLGATHERV,
    K_ALLTOALL,
    K_ALLTOALLV,
    K_ALLTOALLW,
    K_REDSCAT,
    K_REDSCAT_BLOCK,
    K_SCAN,
    K_EXSCAN
};
static const char *kname[] = {
    "barrier",  "bcast",     "reduce",    "allreduce",      "gather",
    "gatherv",  "scatter",   "scatterv",  "allgather",      "allgatherv",
    "alltoall", "alltoallv", "alltoallw", "reduce_scatter", "reduce_scatter_block",
    "scan",     "exscan"};
enum { T_INT, T_DOUBLE, T_VEC, T_DINT, T_MAT };
enum { O_NONE, O_SUM, O_MAX, O_PROD, O_BXOR, O_MINLOC, O_MATMUL, O_VSUM };

typedef struct {
    double v;
    int i;
} dint;
typedef struct {
    int a, b, c, d;
} mat;

static int wrank, wsize;
static MPI_Datatype vec_t, mat_t;
static MPI_Op matmul_op, vsum_op;

/* inout = in * inout: the reduction keeps rank order, so the result is m0 * m1 * ... */
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

/* A commutative user operation on the vector type: its buffers keep the type's gaps
 * (MPICH does not allow predefined operations on derived types). */
static void vsum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        y[3 * i] += x[3 * i];
        y[3 * i + 2] += x[3 * i + 2];
    }
}

#define SENT 0x5A
static size_t esz(int tk)
{
    switch (tk) {
    case T_INT:
        return sizeof(int);
    case T_DOUBLE:
        return sizeof(double);
    case T_VEC:
        return 3 * sizeof(int); /* vector(2, 1, 2) of int: the middle int is a gap */
    case T_DINT:
        return sizeof(dint);
    default:
        return sizeof(mat);
    }
}
static MPI_Datatype dtype(int tk)
{
    MPI_Datatype t[] = {MPI_INT, MPI_DOUBLE, vec_t, MPI_DOUBLE_INT, mat_t};
    return t[tk];
}
static MPI_Op mpiop(int opk)
{
    MPI_Op o[] = {MPI_OP_NULL, MPI_SUM,    MPI_MAX,   MPI_PROD,
                  MPI_BXOR,    MPI_MINLOC, matmul_op, vsum_op};
    return o[opk];
}
#define AT(buf, tk, k) ((buf) + (size_t)(k)*esz(tk))

static int mod(int a, int m)
{
    return ((a % m) + m) % m;
}
static int base(int r, long j, int salt)
{
    uint64_t h = (uint64_t)(r + 1) * 1000003u + (uint64_t)j * 7919u + (uint64_t)salt * 104729u;
    h ^= h >> 11;
    h *= 0x9E3779B1u;
    h ^= h >> 15;
    return (int)(h % 2001) - 1000;
}

/* Rank r's element j: values whose reductions are exact in any order. */
static void fill(int tk, int opk, void *p, int r, long j, int salt)
{
    int b = base(r, j, salt);
    static const int iprod[] = {1, 2, -1};
    static const double dprod[] = {1.0, 2.0, -0.5, 1.5};
    switch (tk) {
    case T_INT:
        *(int *)p = opk == O_PROD ? iprod[mod(b, 3)] : b;
        break;
    case T_DOUBLE:
        *(double *)p = opk == O_PROD ? dprod[mod(b, 4)] : b + 0.5;
        break;
    case T_VEC:
        ((int *)p)[0] = b;
        ((int *)p)[2] = base(r, j, salt + 7);
        break;
    case T_DINT:
        ((dint *)p)->v = mod(b, 4); /* ties are frequent: the lower index must win */
        ((dint *)p)->i = r;
        break;
    default: {
        mat *m = p;
        m->a = 1 + mod(b, 3);
        m->b = 1;
        m->c = 1;
        m->d = 0;
    }
    }
}

/* acc = acc op in, acc holding the lower ranks. */
static void combine(int tk, int opk, void *acc, const void *in)
{
    switch (tk) {
    case T_INT: {
        int *a = acc, x = *(const int *)in;
        *a = opk == O_SUM ? *a + x : opk == O_PROD ? *a * x : *a ^ x;
        break;
    }
    case T_DOUBLE: {
        double *a = acc, x = *(const double *)in;
        *a = opk == O_SUM ? *a + x : opk == O_PROD ? *a * x : (x > *a ? x : *a);
        break;
    }
    case T_VEC:
        ((int *)acc)[0] += ((const int *)in)[0];
        ((int *)acc)[2] += ((const int *)in)[2];
        break;
    case T_DINT: {
        dint *a = acc;
        const dint *x = in;
        if (x->v < a->v || (x->v == a->v && x->i < a->i))
            *a = *x;
        break;
    }
    default: {
        mat m = *(const mat *)in;
        int len = 1;
        matmul(acc, &m, &len, NULL);
        *(mat *)acc = m;
    }
    }
}

/* The reduction of element j over ranks lo..hi. */
static void ref(int tk, int opk, void *out, int lo, int hi, long j, int salt)
{
    char tmp[32];
    memset(out, SENT, esz(tk));
    fill(tk, opk, out, lo, j, salt);
    for (int r = lo + 1; r <= hi; r++) {
        memset(tmp, SENT, sizeof tmp);
        fill(tk, opk, tmp, r, j, salt);
        combine(tk, opk, out, tmp);
    }
}

static int elem_eq(int tk, const char *a, const char *b)
{
    if (tk == T_DINT)
        return memcmp(a, b, sizeof(double)) == 0 &&
               memcmp(a + offsetof(dint, i), b + offsetof(dint, i), sizeof(int)) == 0;
    return memcmp(a, b, esz(tk)) == 0;
}

static char *slab(size_t n, int tk)
{
    size_t b = (n ? n : 1) * esz(tk);
    char *p = malloc(b);
    CHECK(p != NULL, "malloc %zu", b);
    memset(p, SENT, b);
    return p;
}

typedef struct {
    int kind, tk, opk, count, root, inplace, salt, blocking;
    char *sbuf, *rbuf, *exp, *cmp;
    void *sarg, *rarg;
    size_t ncmp;
    int *sc, *sd, *rc, *rd;
    MPI_Datatype *st, *rt;
} ccase;

/* Block counts of the v-variants and of reduce_scatter: some are 0. */
static int vcnt(int r, int count)
{
    return ((r + 1) % 3) * count;
}
/* Alltoallv: rank s sends A(s, d) elements to d (symmetric when in place). */
static int acnt(int s, int d, int count, int inplace)
{
    return (inplace ? (s + d) % 3 : (s + 2 * d) % 3) * count;
}
/* Alltoallw, in ints (always even and symmetric). Odd peers' blocks are sent as the
 * vector type, except in place in MPI_Ialltoallw on MPICH (plain_w): MPICH 4.0.2 fails
 * there with "Message truncated" when the types differ between peers. */
static int mpich, plain_w;
static int wcnt(int s, int d, int count)
{
    return 2 * ((s + d + 1) % 3) * count;
}
static int wvec(int peer, int ip)
{
    return peer % 2 && !(ip && plain_w);
}
static int wspan(int peer, int w, int ip)
{
    return wvec(peer, ip) ? w / 2 * 3 : w;
}
static int wdisp(int x, int y, int count, int ip) /* rank x's block for peer y, in ints */
{
    int d = 0;
    for (int q = 0; q < y; q++)
        d += wspan(q, wcnt(x, q, count), ip) + 1;
    return d;
}
static int wpos(int peer, int k, int ip)
{
    return wvec(peer, ip) ? k / 2 * 3 + k % 2 * 2 : k;
}

static void prepare(ccase *c, MPI_Comm comm)
{
    int me, n, tk = c->tk, opk = c->opk, cnt = c->count, root = c->root, s = c->salt;
    OK(MPI_Comm_rank(comm, &me));
    OK(MPI_Comm_size(comm, &n));
    int isroot = me == root;
    c->sbuf = c->rbuf = c->exp = c->cmp = NULL;
    c->sc = c->sd = c->rc = c->rd = NULL;
    c->st = c->rt = NULL;
    c->ncmp = 0;
    c->sc = malloc(sizeof(int) * n);
    c->sd = malloc(sizeof(int) * n);
    c->rc = malloc(sizeof(int) * n);
    c->rd = malloc(sizeof(int) * n);
    int total = 0;
    switch (c->kind) {
    case K_BARRIER:
        break;
    case K_BCAST:
        c->rbuf = slab(cnt + 1, tk);
        c->exp = slab(cnt + 1, tk);
        for (int j = 0; j < cnt; j++) {
            fill(tk, opk, AT(c->exp, tk, j), root, j, s);
            if (isroot)
                fill(tk, opk, AT(c->rbuf, tk, j), root, j, s);
        }
        c->ncmp = cnt + 1;
        break;
    case K_REDUCE:
    case K_ALLREDUCE:
    case K_SCAN:
    case K_EXSCAN: {
        c->sbuf = slab(cnt, tk);
        for (int j = 0; j < cnt; j++)
            fill(tk, opk, AT(c->sbuf, tk, j), me, j, s);
        int want = c->kind == K_ALLREDUCE || c->kind == K_SCAN ||
                   (c->kind == K_REDUCE && isroot) || (c->kind == K_EXSCAN && me > 0);
        int lo = 0, hi = c->kind == K_SCAN ? me : c->kind == K_EXSCAN ? me - 1 : n - 1;
        c->rbuf = slab(cnt + 1, tk);
        c->exp = slab(cnt + 1, tk);
        int ip = c->inplace && (c->kind != K_REDUCE || isroot);
        if (ip)
            memcpy(c->rbuf, c->sbuf, cnt * esz(tk));
        if (want) {
            for (int j = 0; j < cnt; j++)
                ref(tk, opk, AT(c->exp, tk, j), lo, hi, j, s);
            c->ncmp = cnt + 1;
        }
        c->sarg = ip ? MPI_IN_PLACE : c->sbuf;
        c->rarg = c->kind == K_REDUCE && !isroot ? NULL : c->rbuf;
        break;
    }
    case K_GATHER:
    case K_GATHERV:
    case K_ALLGATHER:
    case K_ALLGATHERV: {
        int v = c->kind == K_GATHERV || c->kind == K_ALLGATHERV;
        int all = c->kind == K_ALLGATHER || c->kind == K_ALLGATHERV;
        for (int r = n - 1; r >= 0; r--) { /* blocks in reverse rank order, with gaps */
            c->rc[r] = v ? vcnt(r, cnt) : cnt;
            c->rd[r] = v ? total : r * cnt;
            total += v ? c->rc[r] + 1 : cnt;
        }
        c->sbuf = slab(c->rc[me], tk);
        for (int j = 0; j < c->rc[me]; j++)
            fill(tk, opk, AT(c->sbuf, tk, j), me, j, s);
        c->sarg = c->sbuf;
        c->rarg = NULL;
        if (all || isroot) {
            c->rbuf = slab(total + 1, tk);
            c->exp = slab(total + 1, tk);
            for (int r = 0; r < n; r++)
                for (int j = 0; j < c->rc[r]; j++)
                    fill(tk, opk, AT(c->exp, tk, c->rd[r] + j), r, j, s);
            if (c->inplace) {
                memcpy(AT(c->rbuf, tk, c->rd[me]), c->sbuf, c->rc[me] * esz(tk));
                c->sarg = MPI_IN_PLACE;
            }
            c->rarg = c->rbuf;
            c->ncmp = total + 1;
        }
        break;
    }
    case K_SCATTER:
    case K_SCATTERV: {
        int v = c->kind == K_SCATTERV;
        for (int d = 0; d < n; d++) {
            c->sc[d] = v ? vcnt(d, cnt) : cnt;
            c->sd[d] = v ? total : d * cnt;
            total += v ? c->sc[d] + 1 : cnt;
        }
        c->sarg = NULL;
        if (isroot) {
            c->sbuf = slab(total, tk);
            for (int d = 0; d < n; d++)
                for (int j = 0; j < c->sc[d]; j++)
                    fill(tk, opk, AT(c->sbuf, tk, c->sd[d] + j), d, j, s);
            c->sarg = c->sbuf;
        }
        int mine = v ? vcnt(me, cnt) : cnt;
        c->rbuf = slab(mine + 1, tk);
        c->rarg = c->rbuf;
        if (isroot && c->inplace) { /* the root's block stays where it is */
            c->exp = slab(total, tk);
            memcpy(c->exp, c->sbuf, total * esz(tk));
            c->cmp = c->sbuf;
            c->ncmp = total;
            c->rarg = MPI_IN_PLACE;
        } else {
            c->exp = slab(mine + 1, tk);
            for (int j = 0; j < mine; j++)
                fill(tk, opk, AT(c->exp, tk, j), me, j, s);
            c->ncmp = mine + 1;
        }
        break;
    }
    case K_ALLTOALL:
    case K_ALLTOALLV: {
        int v = c->kind == K_ALLTOALLV, ip = c->inplace;
        /* Sends ascend with gaps; receives descend with gaps (in place: the send layout). */
        int stotal = 0;
        for (int d = 0; d < n; d++) {
            c->sc[d] = v ? acnt(me, d, cnt, ip) : cnt;
            c->sd[d] = v ? stotal : d * cnt;
            stotal += v ? c->sc[d] + 1 : cnt;
        }
        for (int r = n - 1; r >= 0; r--) {
            c->rc[r] = v ? acnt(r, me, cnt, ip) : cnt;
            c->rd[r] = v && !ip ? total : c->sd[r];
            total += v && !ip ? c->rc[r] + 1 : 0;
        }
        if (!v || ip)
            total = stotal;
        c->sbuf = slab(stotal, tk);
        for (int k = 0; k < stotal; k++)
            fill(tk, opk, AT(c->sbuf, tk, k), me, k, s);
        c->rbuf = slab(total + 1, tk);
        c->exp = slab(total + 1, tk);
        if (ip) /* the gaps keep what was there */
            memcpy(c->exp, c->sbuf, stotal * esz(tk));
        for (int r = 0; r < n; r++) {
            /* Where rank r keeps its block for me. */
            int from = 0;
            if (!v)
                from = me * cnt;
            else
                for (int q = 0; q < me; q++)
                    from += acnt(r, q, cnt, ip) + 1;
            for (int j = 0; j < c->rc[r]; j++)
                fill(tk, opk, AT(c->exp, tk, c->rd[r] + j), r, from + j, s);
        }
        if (ip) {
            memcpy(c->rbuf, c->sbuf, stotal * esz(tk));
            c->sarg = MPI_IN_PLACE;
        } else {
            c->sarg = c->sbuf;
        }
        c->rarg = c->rbuf;
        c->ncmp = total + 1;
        break;
    }
    case K_ALLTOALLW: { /* in ints; odd peers' blocks are vectors (2, 1, 2) */
        c->st = malloc(sizeof(MPI_Datatype) * n);
        c->rt = malloc(sizeof(MPI_Datatype) * n);
        int ip = c->inplace, stotal = wdisp(me, n, cnt, ip);
        for (int d = 0; d < n; d++) {
            int w = wcnt(me, d, cnt);
            c->sc[d] = wvec(d, ip) ? w / 2 : w;
            c->st[d] = wvec(d, ip) ? vec_t : MPI_INT;
            c->sd[d] = wdisp(me, d, cnt, ip) * (int)sizeof(int);
        }
        for (int r = n - 1; r >= 0; r--) {
            int w = wcnt(r, me, cnt);
            if (ip) {
                c->rc[r] = c->sc[r];
                c->rt[r] = c->st[r];
                c->rd[r] = c->sd[r];
            } else {
                c->rc[r] = w;
                c->rt[r] = MPI_INT;
                c->rd[r] = total * (int)sizeof(int);
                total += w + 1;
            }
        }
        if (ip)
            total = stotal;
        c->sbuf = slab(stotal, T_INT);
        for (int k = 0; k < stotal; k++)
            fill(T_INT, opk, AT(c->sbuf, T_INT, k), me, k, s);
        c->rbuf = slab(total + 1, T_INT);
        c->exp = slab(total + 1, T_INT);
        if (ip) {
            memcpy(c->rbuf, c->sbuf, stotal * sizeof(int));
            memcpy(c->exp, c->sbuf, stotal * sizeof(int));
        }
        for (int r = 0; r < n; r++)
            for (int k = 0; k < wcnt(r, me, cnt); k++) {
                int at = c->rd[r] / (int)sizeof(int) + (ip ? wpos(r, k, ip) : k);
                fill(T_INT, opk, AT(c->exp, T_INT, at), r,
                     wdisp(r, me, cnt, ip) + wpos(me, k, ip), s);
            }
        c->sarg = ip ? MPI_IN_PLACE : c->sbuf;
        c->rarg = c->rbuf;
        c->ncmp = total + 1;
        c->tk = T_INT;
        break;
    }
    case K_REDSCAT:
    case K_REDSCAT_BLOCK: {
        int off = 0;
        for (int r = 0; r < n; r++) {
            c->rc[r] = c->kind == K_REDSCAT ? vcnt(r, cnt) : cnt;
            if (r < me)
                off += c->rc[r];
            total += c->rc[r];
        }
        c->sbuf = slab(total, tk);
        for (int j = 0; j < total; j++)
            fill(tk, opk, AT(c->sbuf, tk, j), me, j, s);
        c->rbuf = slab((c->inplace ? total : c->rc[me]) + 1, tk);
        c->exp = slab(c->rc[me] + 1, tk);
        for (int j = 0; j < c->rc[me]; j++)
            ref(tk, opk, AT(c->exp, tk, j), 0, n - 1, off + j, s);
        if (c->inplace) {
            memcpy(c->rbuf, c->sbuf, total * esz(tk));
            c->ncmp = c->rc[me]; /* the rest of the buffer is undefined */
        } else {
            c->ncmp = c->rc[me] + 1;
        }
        c->sarg = c->inplace ? MPI_IN_PLACE : c->sbuf;
        c->rarg = c->rbuf;
        break;
    }
    }
    if (!c->cmp)
        c->cmp = c->rbuf;
}

static void launch(ccase *c, MPI_Comm comm, MPI_Request *req)
{
    MPI_Datatype dt = dtype(c->tk);
    MPI_Op op = mpiop(c->opk);
    int cnt = c->count, root = c->root, nb = req != NULL;
    void *sb = c->sarg, *rb = c->rarg;
#define NB(blocking, nonblocking) OK(nb ? MPI_##nonblocking : MPI_##blocking)
    switch (c->kind) {
    case K_BARRIER:
        NB(Barrier(comm), Ibarrier(comm, req));
        break;
    case K_BCAST:
        NB(Bcast(c->rbuf, cnt, dt, root, comm), Ibcast(c->rbuf, cnt, dt, root, comm, req));
        break;
    case K_REDUCE:
        NB(Reduce(sb, rb, cnt, dt, op, root, comm),
           Ireduce(sb, rb, cnt, dt, op, root, comm, req));
        break;
    case K_ALLREDUCE:
        NB(Allreduce(sb, rb, cnt, dt, op, comm), Iallreduce(sb, rb, cnt, dt, op, comm, req));
        break;
    case K_SCAN:
        NB(Scan(sb, rb, cnt, dt, op, comm), Iscan(sb, rb, cnt, dt, op, comm, req));
        break;
    case K_EXSCAN:
        NB(Exscan(sb, rb, cnt, dt, op, comm), Iexscan(sb, rb, cnt, dt, op, comm, req));
        break;
    case K_GATHER:
        NB(Gather(sb, cnt, dt, rb, cnt, dt, root, comm),
           Igather(sb, cnt, dt, rb, cnt, dt, root, comm, req));
        break;
    case K_GATHERV: {
        int me;
        MPI_Comm_rank(comm, &me);
        NB(Gatherv(sb, c->rc[me], dt, rb, c->rc, c->rd, dt, root, comm),
           Igatherv(sb, c->rc[me], dt, rb, c->rc, c->rd, dt, root, comm, req));
        break;
    }
    case K_ALLGATHER:
        NB(Allgather(sb, cnt, dt, rb, cnt, dt, comm),
           Iallgather(sb, cnt, dt, rb, cnt, dt, comm, req));
        break;
    case K_ALLGATHERV: {
        int me;
        MPI_Comm_rank(comm, &me);
        NB(Allgatherv(sb, c->rc[me], dt, rb, c->rc, c->rd, dt, comm),
           Iallgatherv(sb, c->rc[me], dt, rb, c->rc, c->rd, dt, comm, req));
        break;
    }
    case K_SCATTER:
        NB(Scatter(sb, cnt, dt, rb, cnt, dt, root, comm),
           Iscatter(sb, cnt, dt, rb, cnt, dt, root, comm, req));
        break;
    case K_SCATTERV: {
        int me;
        MPI_Comm_rank(comm, &me);
        NB(Scatterv(sb, c->sc, c->sd, dt, rb, vcnt(me, cnt), dt, root, comm),
           Iscatterv(sb, c->sc, c->sd, dt, rb, vcnt(me, cnt), dt, root, comm, req));
        break;
    }
    case K_ALLTOALL:
        NB(Alltoall(sb, cnt, dt, rb, cnt, dt, comm),
           Ialltoall(sb, cnt, dt, rb, cnt, dt, comm, req));
        break;
    case K_ALLTOALLV:
        NB(Alltoallv(sb, c->sc, c->sd, dt, rb, c->rc, c->rd, dt, comm),
           Ialltoallv(sb, c->sc, c->sd, dt, rb, c->rc, c->rd, dt, comm, req));
        break;
    case K_ALLTOALLW:
        NB(Alltoallw(sb, c->sc, c->sd, c->st, rb, c->rc, c->rd, c->rt, comm),
           Ialltoallw(sb, c->sc, c->sd, c->st, rb, c->rc, c->rd, c->rt, comm, req));
        break;
    case K_REDSCAT:
        NB(Reduce_scatter(sb, rb, c->rc, dt, op, comm),
           Ireduce_scatter(sb, rb, c->rc, dt, op, comm, req));
        break;
    case K_REDSCAT_BLOCK:
        NB(Reduce_scatter_block(sb, rb, cnt, dt, op, comm),
           Ireduce_scatter_block(sb, rb, cnt, dt, op, comm, req));
        break;
    }
#undef NB
}

static void verify(ccase *c, const char *where, int nb)
{
    for (size_t k = 0; k < c->ncmp; k++) {
        const char *g = AT(c->cmp, c->tk, k), *e = AT(c->exp, c->tk, k);
        CHECK(elem_eq(c->tk, g, e),
              "%s %s %s count %d root %d in place %d type %d op %d: slot %zu of %zu has "
              "%08x%08x, expected %08x%08x",
              where, nb ? "nonblocking" : "blocking", kname[c->kind], c->count, c->root,
              c->inplace, c->tk, c->opk, k, c->ncmp, ((const unsigned *)g)[0],
              esz(c->tk) > 4 ? ((const unsigned *)g)[1] : 0, ((const unsigned *)e)[0],
              esz(c->tk) > 4 ? ((const unsigned *)e)[1] : 0);
    }
}

static void release(ccase *c)
{
    free(c->sbuf);
    free(c->rbuf);
    free(c->exp);
    free(c->sc);
    free(c->sd);
    free(c->rc);
    free(c->rd);
    free(c->st);
    free(c->rt);
}

#define MAXCASES 2000
static ccase cases[MAXCASES];
static int ncases;

static void add(int kind, int tk, int opk, int count, int root, int inplace)
{
    CHECK(ncases < MAXCASES, "too many cases");
    ccase *c = &cases[ncases];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->tk = tk;
    c->opk = opk;
    c->count = count;
    c->root = root;
    c->inplace = inplace;
    c->salt = ncases;
    c->blocking = ncases % 7 == 0; /* blocking collectives are slow when oversubscribed */
    ncases++;
}

static void build(int n, int full)
{
    static const int counts[] = {0, 1, 1000};
    static const int plain[] = {T_INT, T_DOUBLE, T_VEC};
    static const int red[][2] = {{T_INT, O_SUM},     {T_INT, O_BXOR},    {T_INT, O_PROD},
                                 {T_DOUBLE, O_MAX},  {T_DOUBLE, O_PROD}, {T_DOUBLE, O_SUM},
                                 {T_DINT, O_MINLOC}, {T_MAT, O_MATMUL},  {T_VEC, O_VSUM}};
    ncases = 0;
    add(K_BARRIER, T_INT, O_NONE, 0, 0, 0);
    for (int ci = full ? 0 : 1; ci < 3; ci++) {
        int cnt = counts[ci];
        /* Every root and type for count 1; roots 0 and n-1 otherwise; int only for 0. */
        for (int ti = 0; ti < (cnt ? 3 : 1); ti++) {
            int tk = plain[ti];
            for (int root = 0; root < n; root++) {
                if (cnt != 1 && root != 0 && root != n - 1)
                    continue;
                add(K_BCAST, tk, O_NONE, cnt, root, 0);
                for (int ip = 0; ip < 2; ip++) {
                    add(K_GATHER, tk, O_NONE, cnt, root, ip);
                    add(K_GATHERV, tk, O_NONE, cnt, root, ip);
                    add(K_SCATTER, tk, O_NONE, cnt, root, ip);
                    add(K_SCATTERV, tk, O_NONE, cnt, root, ip);
                }
            }
            for (int ip = 0; ip < 2; ip++) {
                add(K_ALLGATHER, tk, O_NONE, cnt, 0, ip);
                add(K_ALLGATHERV, tk, O_NONE, cnt, 0, ip);
                add(K_ALLTOALL, tk, O_NONE, cnt, 0, ip);
                add(K_ALLTOALLV, tk, O_NONE, cnt, 0, ip);
            }
        }
        for (int ip = 0; ip < 2; ip++)
            add(K_ALLTOALLW, T_INT, O_NONE, cnt, 0, ip);
        for (int oi = 0; oi < 9; oi++) {
            int tk = red[oi][0], opk = red[oi][1];
            if (cnt == 0 && opk != O_SUM && opk != O_MATMUL)
                continue;
            for (int ip = 0; ip < 2; ip++) {
                for (int root = 0; root < n; root++)
                    if (cnt == 1 || root == 0 || root == n - 1)
                        add(K_REDUCE, tk, opk, cnt, root, ip);
                add(K_ALLREDUCE, tk, opk, cnt, 0, ip);
                add(K_REDSCAT, tk, opk, cnt, 0, ip);
                add(K_REDSCAT_BLOCK, tk, opk, cnt, 0, ip);
                add(K_SCAN, tk, opk, cnt, 0, ip);
                add(K_EXSCAN, tk, opk, cnt, 0, ip);
            }
        }
        add(K_BARRIER, T_INT, O_NONE, 0, 0, 0);
    }
    if (!full)
        return;
    /* 100000 elements for some collectives (the v-variants are slow on MPICH
     * when ranks outnumber cores). */
    int big = 100000, last = n - 1;
    add(K_BCAST, T_INT, O_NONE, big, last, 0);
    add(K_REDUCE, T_INT, O_SUM, big, 0, 0);
    add(K_REDUCE, T_MAT, O_MATMUL, big, last, 0);
    add(K_ALLREDUCE, T_DOUBLE, O_MAX, big, 0, 1);
    add(K_ALLREDUCE, T_VEC, O_VSUM, big, 0, 0);
    add(K_GATHER, T_DOUBLE, O_NONE, big, n / 2, 0);
    add(K_SCATTER, T_VEC, O_NONE, big, 0, 0);
    add(K_ALLGATHER, T_INT, O_NONE, big, 0, 0);
    add(K_ALLTOALL, T_INT, O_NONE, big, 0, 0);
    add(K_REDSCAT_BLOCK, T_DOUBLE, O_SUM, big, 0, 1);
    add(K_SCAN, T_INT, O_SUM, big, 0, 0);
    /* The blocking pass runs every seventh case and at least one of each collective. */
    for (int k = K_BARRIER; k <= K_EXSCAN; k++) {
        int i, any = 0;
        for (i = 0; i < ncases; i++)
            any |= cases[i].kind == k && cases[i].blocking;
        for (i = 0; i < ncases && !any; i++)
            if (cases[i].kind == k && cases[i].count == 1000)
                any = cases[i].blocking = 1;
    }
}

/* Completes reqs[0..m) in one of several ways; every status lands in st[index]. */
static void complete(int how, int m, MPI_Request *reqs, MPI_Status *st)
{
    int done = 0, idx, flag, out, *ids = malloc(sizeof(int) * m);
    MPI_Status one, *sts = malloc(sizeof(MPI_Status) * m);
    switch (how) {
    case 0:
        OK(MPI_Waitall(m, reqs, st));
        done = m;
        break;
    case 1:
        while (done < m) {
            OK(MPI_Testany(m, reqs, &idx, &flag, &one));
            if (flag) {
                CHECK(idx != MPI_UNDEFINED, "Testany ran out after %d of %d", done, m);
                st[idx] = one;
                done++;
            }
        }
        OK(MPI_Testany(m, reqs, &idx, &flag, &one));
        CHECK(flag && idx == MPI_UNDEFINED, "Testany on all-null gives flag and MPI_UNDEFINED");
        break;
    case 2:
        while (done < m) {
            OK(MPI_Waitsome(m, reqs, &out, ids, sts));
            CHECK(out != MPI_UNDEFINED && out > 0, "Waitsome returned %d", out);
            for (int k = 0; k < out; k++)
                st[ids[k]] = sts[k];
            done += out;
        }
        OK(MPI_Waitsome(m, reqs, &out, ids, sts));
        CHECK(out == MPI_UNDEFINED, "Waitsome on all-null returns MPI_UNDEFINED, got %d", out);
        break;
    case 3:
        while (done < m) {
            OK(MPI_Testsome(m, reqs, &out, ids, sts));
            CHECK(out != MPI_UNDEFINED, "Testsome ran out after %d of %d", done, m);
            for (int k = 0; k < out; k++)
                st[ids[k]] = sts[k];
            done += out;
        }
        break;
    case 4: { /* Wait one by one in a scrambled order */
        for (int k = 0; k < m; k++)
            ids[k] = k;
        unsigned x = 12345;
        for (int k = m - 1; k > 0; k--) {
            x = x * 1103515245u + 12345u;
            int o = (int)((x >> 8) % (unsigned)(k + 1)), t = ids[k];
            ids[k] = ids[o];
            ids[o] = t;
        }
        for (int k = 0; k < m; k++)
            OK(MPI_Wait(&reqs[ids[k]], &st[ids[k]]));
        done = m;
        break;
    }
    case 5:
        while (done < m) {
            OK(MPI_Waitany(m, reqs, &idx, &one));
            CHECK(idx != MPI_UNDEFINED, "Waitany ran out after %d of %d", done, m);
            st[idx] = one;
            done++;
        }
        break;
    default: /* Test each from the back until all are done */
        while (done < m)
            for (int k = m - 1; k >= 0; k--)
                if (reqs[k] != MPI_REQUEST_NULL) {
                    OK(MPI_Test(&reqs[k], &flag, &st[k]));
                    if (flag)
                        done++;
                }
    }
    for (int k = 0; k < m; k++)
        CHECK(reqs[k] == MPI_REQUEST_NULL, "request %d still active after completion %d", k,
              how);
    free(ids);
    free(sts);
}

#define BATCH 20
static void run_batches(MPI_Comm comm, const char *where)
{
    int me, n;
    OK(MPI_Comm_rank(comm, &me));
    OK(MPI_Comm_size(comm, &n));
    int right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_Request reqs[3 * BATCH + 4];
    MPI_Status st[3 * BATCH + 4];
    int pin[BATCH + 1], pout[BATCH + 1];
    plain_w = mpich;
    for (int b0 = 0, how = 0; b0 < ncases; b0 += BATCH, how++) {
        int nb = ncases - b0 < BATCH ? ncases - b0 : BATCH, m = 0;
        /* A wildcard receive first: only the ring message with tag 100 may match it. */
        pin[BATCH] = -1;
        pout[BATCH] = me * 1000 + 999;
        OK(MPI_Irecv(&pin[BATCH], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &reqs[m++]));
        OK(MPI_Isend(&pout[BATCH], 1, MPI_INT, right, 100, comm, &reqs[m++]));
        for (int i = 0; i < nb; i++) {
            prepare(&cases[b0 + i], comm);
            launch(&cases[b0 + i], comm, &reqs[m++]);
            if (i % 2 == 0) {
                pin[i] = -1;
                pout[i] = me * 1000 + i;
                OK(MPI_Irecv(&pin[i], 1, MPI_INT, left, i, comm, &reqs[m++]));
                OK(MPI_Isend(&pout[i], 1, MPI_INT, right, i, comm, &reqs[m++]));
            }
        }
        complete(how % 7, m, reqs, st);
        CHECK(pin[BATCH] == left * 1000 + 999 && st[0].MPI_SOURCE == left &&
                  st[0].MPI_TAG == 100,
              "%s: the wildcard receive got %d from %d tag %d", where, pin[BATCH],
              st[0].MPI_SOURCE, st[0].MPI_TAG);
        for (int i = 0; i < nb; i += 2)
            CHECK(pin[i] == left * 1000 + i, "%s: ring message %d is %d", where, i, pin[i]);
        for (int i = 0; i < nb; i++) {
            verify(&cases[b0 + i], where, 1);
            release(&cases[b0 + i]);
        }
    }
}

static void run_blocking(MPI_Comm comm, const char *where)
{
    plain_w = 0;
    for (int i = 0; i < ncases; i++) {
        ccase *c = &cases[i];
        if (!c->blocking)
            continue;
        /* MPICH 4.0.2's blocking MPI_Reduce crashes with MPI_IN_PLACE at a non-zero root
         * above 2048 bytes (its reduce-scatter-gather algorithm); MPI_Ireduce works. */
        if (mpich && c->kind == K_REDUCE && c->inplace && c->root != 0 &&
            c->count * esz(c->tk) > 2048)
            continue;
        prepare(&cases[i], comm);
        launch(&cases[i], comm, NULL);
        verify(&cases[i], where, 0);
        release(&cases[i]);
    }
}

/* full: counts 0 and 100000 too (on MPI_COMM_WORLD only, to keep the test short). */
static void suite(MPI_Comm comm, const char *where, int full)
{
    int n;
    OK(MPI_Comm_size(comm, &n));
    build(n, full);
    run_blocking(comm, where);
    run_batches(comm, where);
}

/* Ibarrier on rank 0 cannot complete before the last rank, which waits for a message that
 * rank 0 sends only after testing its barrier, has entered it. */
static void barrier_order(void)
{
    if (wsize < 2)
        return;
    MPI_Request r;
    int flag = 1, token = 7;
    if (wrank == 0) {
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        for (int k = 0; k < 5; k++) {
            OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "Ibarrier completed before rank %d entered it", wsize - 1);
        }
        OK(MPI_Send(&token, 1, MPI_INT, wsize - 1, 5, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (wrank == wsize - 1) {
        OK(MPI_Recv(&token, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
}

/* Outstanding collectives on two communicators at once, completed in reverse order. */
static void two_comms(MPI_Comm split)
{
    int ssize, a = wrank + 1, sum = 0, b[3] = {-1, -1, -1};
    OK(MPI_Comm_size(split, &ssize));
    MPI_Request r[2];
    if (wrank == 0)
        b[0] = 11, b[1] = 22, b[2] = 33;
    OK(MPI_Iallreduce(&a, &sum, 1, MPI_INT, MPI_SUM, split, &r[0]));
    OK(MPI_Ibcast(b, 3, MPI_INT, 0, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    int want = 0;
    for (int q = wrank % 2; q < wsize; q += 2)
        want += q + 1;
    CHECK(sum == want && b[0] == 11 && b[1] == 22 && b[2] == 33,
          "two communicators: sum %d (want %d), bcast %d %d %d", sum, want, b[0], b[1], b[2]);
}

/* One broadcast, two paths: half the ranks pass a derived contiguous type, the others the
 * same signature in predefined elements (Kestrel runs the first through its general schedule
 * builder and the second through the posted-round short path; both must draw the same
 * rounds), between allreduces and barriers. More outstanding than the segment has posted
 * lines, completed in reverse order. */
static void mixed_paths(void)
{
    enum { M = 12 };
    MPI_Request r[3 * M];
    int in[M][4], out[M][4], bc[M][4], nr = 0, even = wrank % 2 == 0;
    for (int k = 0; k < M; k++) {
        int root = k % wsize;
        for (int j = 0; j < 4; j++) {
            in[k][j] = wrank * 10 + j + k;
            out[k][j] = -1;
            bc[k][j] = wrank == root ? 100 * k + j : -1;
        }
        OK(MPI_Iallreduce(in[k], out[k], 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[nr++]));
        if ((wrank == root) == even)
            OK(MPI_Ibcast(bc[k], 1, mat_t, root, MPI_COMM_WORLD, &r[nr++]));
        else
            OK(MPI_Ibcast(bc[k], 4, MPI_INT, root, MPI_COMM_WORLD, &r[nr++]));
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r[nr++]));
    }
    for (int q = nr - 1; q >= 0; q--)
        OK(MPI_Wait(&r[q], MPI_STATUS_IGNORE));
    /* A collective of messages after them: its tags come from the communicator's sequence,
     * which both paths must have advanced alike. */
    int *all = malloc(sizeof(int) * wsize);
    OK(MPI_Iallgather(&wrank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    for (int q = 0; q < wsize; q++)
        CHECK(all[q] == q, "mixed paths: allgather after them %d = %d", q, all[q]);
    free(all);
    for (int k = 0; k < M; k++)
        for (int j = 0; j < 4; j++) {
            int want = 10 * wsize * (wsize - 1) / 2 + wsize * (j + k);
            CHECK(out[k][j] == want, "mixed paths: allreduce %d[%d] = %d, want %d", k, j,
                  out[k][j], want);
            CHECK(bc[k][j] == 100 * k + j, "mixed paths: bcast %d[%d] = %d, want %d", k, j,
                  bc[k][j], 100 * k + j);
        }
}

/* A sum of ints under any contiguous type of ints (the caller's: even ranks pass groups of
 * four, odd ones single ints, so members cut the data into different elements). */
static void isum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int size = 0;
    MPI_Type_size(*dt, &size);
    int *x = in, *y = inout;
    for (long i = 0; i < (long)*len * (size / (int)sizeof(int)); i++)
        y[i] += x[i];
}

/* Large allreduces (Kestrel: shared posted rounds, where whoever is in the library reduces
 * chunks for every member through their own buffers): in place and not, a user operation
 * on ints passed as a derived contiguous type on even ranks and as MPI_INT on odd ones,
 * several outstanding with a blocking allreduce between them, completed in reverse order;
 * then the same buffers again (the rounds reuse their lines). */
static void large_allreduces(void)
{
    enum { N = 300000, D = 20000 };
    int *in = malloc(sizeof(int) * N), *out = malloc(sizeof(int) * N);
    int *inplace = malloc(sizeof(int) * N);
    double *dmax = malloc(sizeof(double) * D);
    int *blk = malloc(sizeof(int) * N);
    CHECK(in && out && inplace && dmax && blk, "large allreduces: out of memory");
    MPI_Op isum_op;
    OK(MPI_Op_create(isum, 1, &isum_op));
    for (int pass = 0; pass < 2; pass++) {
        MPI_Request r[3];
        for (long j = 0; j < N; j++) {
            in[j] = wrank * 7 + (int)(j % 1000) + pass;
            out[j] = -1;
            inplace[j] = wrank + (int)(j % 13);
            blk[j] = wrank;
        }
        for (long j = 0; j < D; j++)
            dmax[j] = (double)((wrank * 31 + j) % 97);
        if (wrank % 2 == 0)
            OK(MPI_Iallreduce(in, out, N / 4, mat_t, isum_op, MPI_COMM_WORLD, &r[0]));
        else
            OK(MPI_Iallreduce(in, out, N, MPI_INT, isum_op, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Iallreduce(MPI_IN_PLACE, inplace, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Allreduce(MPI_IN_PLACE, blk, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        OK(MPI_Iallreduce(MPI_IN_PLACE, dmax, D, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &r[2]));
        for (int q = 2; q >= 0; q--)
            OK(MPI_Wait(&r[q], MPI_STATUS_IGNORE));
        long bad = 0;
        for (long j = 0; j < N; j++) {
            int want = 7 * wsize * (wsize - 1) / 2 + wsize * ((int)(j % 1000) + pass);
            int want_ip = wsize * (wsize - 1) / 2 + wsize * (int)(j % 13);
            if (out[j] != want || inplace[j] != want_ip || blk[j] != wsize - 1) {
                if (bad++ < 3)
                    CHECK(0, "large allreduce pass %d [%ld]: %d/%d (want %d/%d), max %d", pass,
                          j, out[j], inplace[j], want, want_ip, blk[j]);
            }
        }
        for (long j = 0; j < D; j++) {
            double want = 0;
            for (int q = 0; q < wsize; q++)
                want = want > (double)((q * 31 + j) % 97) ? want : (double)((q * 31 + j) % 97);
            if (dmax[j] != want && bad++ < 3)
                CHECK(0, "large allreduce pass %d: max[%ld] = %g, want %g", pass, j, dmax[j],
                      want);
        }
        CHECK(bad == 0, "large allreduces: %ld wrong elements", bad);
    }
    free(in);
    free(out);
    free(inplace);
    free(dmax);
    free(blk);
    OK(MPI_Op_free(&isum_op));
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec_t));
    OK(MPI_Type_commit(&vec_t));
    OK(MPI_Type_contiguous(4, MPI_INT, &mat_t));
    OK(MPI_Type_commit(&mat_t));
    OK(MPI_Op_create(matmul, 0, &matmul_op));
    OK(MPI_Op_create(vsum, 1, &vsum_op));
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    OK(MPI_Get_library_version(version, &vlen));
    mpich = strncmp(version, "MPICH", 5) == 0;
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext));
    CHECK(ext == (MPI_Aint)sizeof(dint), "MPI_DOUBLE_INT extent %ld", (long)ext);
    OK(MPI_Type_get_extent(vec_t, &lb, &ext));
    CHECK(ext == 3 * (MPI_Aint)sizeof(int), "vector extent %ld", (long)ext);

    barrier_order();
    suite(MPI_COMM_WORLD, "world", 1);
    MPI_Comm split;
    OK(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &split));
    suite(split, "split", 0);
    two_comms(split);
    mixed_paths();
    large_allreduces();
    barrier_order();
    OK(MPI_Comm_free(&split));
    OK(MPI_Op_free(&matmul_op));
    OK(MPI_Op_free(&vsum_op));
    OK(MPI_Type_free(&vec_t));
    OK(MPI_Type_free(&mat_t));
    test_pass("nbc");
    return 0;
}
