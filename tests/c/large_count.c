/*
 * MPI-4's large-count ("_c", MPI_Count) bindings, with small counts: they test the
 * binding, not sizes. Point-to-point: MPI_Send_c/Recv_c, Isend_c/Irecv_c, Ssend_c,
 * Rsend_c, Sendrecv_c, Sendrecv_replace_c, Send_init_c/Recv_init_c, Bsend_c with
 * Buffer_attach_c/Buffer_detach_c, Mprobe + Mrecv_c, Improbe + Imrecv_c, Get_count_c and
 * Get_elements_c; collectives: Bcast_c, Reduce_c, Allreduce_c, Gather(v)_c, Scatter(v)_c,
 * Allgather(v)_c, Alltoall(v,w)_c, Reduce_scatter(_block)_c, Scan_c, Exscan_c, and
 * Ibcast_c, Iallreduce_c, Igatherv_c, Ialltoallv_c; datatypes: Type_contiguous_c,
 * vector_c, create_hvector_c, indexed_c, create_hindexed_c, create_struct_c,
 * create_subarray_c, create_resized_c, Type_size_c, get_extent_c, get_true_extent_c,
 * get_envelope_c/get_contents_c, a type of 2^33 bytes (sizes only); Pack_c/Unpack_c/
 * Pack_size_c; MPI_Op_create_c with an MPI_User_function_c, used by Allreduce_c and
 * Reduce_local_c. (A real message over 2^31 bytes is left out: MPICH 4.0.2 takes about
 * 30 s for one.) At least 2 ranks (2-6 tested).
 */
#include "check.h"

static int rank, size;

static int v(int r, int i)
{
    return r * 1000 + i;
}

static void p2p(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[50], in[60];
    MPI_Status st;
    MPI_Count c = -1, e = -1;
    for (int i = 0; i < 50; i++)
        out[i] = v(rank, i);
    /* Ring: Sendrecv_c, then Isend_c/Irecv_c. */
    OK(MPI_Sendrecv_c(out, 50, MPI_INT, right, 1, in, 60, MPI_INT, left, 1, MPI_COMM_WORLD,
                      &st));
    OK(MPI_Get_count_c(&st, MPI_INT, &c));
    OK(MPI_Get_elements_c(&st, MPI_INT, &e));
    CHECK(c == 50 && e == 50 && in[49] == v(left, 49) && st.MPI_SOURCE == left,
          "Sendrecv_c: count %lld elements %lld", (long long)c, (long long)e);
    MPI_Request q[2];
    OK(MPI_Irecv_c(in, 60, MPI_INT, left, 2, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Isend_c(out, 7, MPI_INT, right, 2, MPI_COMM_WORLD, &q[1]));
    MPI_Status sts[2];
    OK(MPI_Waitall(2, q, sts));
    OK(MPI_Get_count_c(&sts[0], MPI_INT, &c));
    CHECK(c == 7 && in[6] == v(left, 6), "Isend_c/Irecv_c: count %lld", (long long)c);
    int rep[3] = {v(rank, 0), v(rank, 1), v(rank, 2)};
    OK(MPI_Sendrecv_replace_c(rep, 3, MPI_INT, right, 3, left, 3, MPI_COMM_WORLD, &st));
    CHECK(rep[2] == v(left, 2), "Sendrecv_replace_c: %d", rep[2]);
    /* Persistent, started twice. */
    int pout = 0, pin = -1;
    OK(MPI_Recv_init_c(&pin, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Send_init_c(&pout, 1, MPI_INT, right, 4, MPI_COMM_WORLD, &q[1]));
    for (int it = 0; it < 2; it++) {
        pout = v(rank, 100 + it);
        OK(MPI_Startall(2, q));
        OK(MPI_Waitall(2, q, sts));
        CHECK(pin == v(left, 100 + it), "persistent _c iteration %d: %d", it, pin);
    }
    OK(MPI_Request_free(&q[0]));
    OK(MPI_Request_free(&q[1]));

    if (rank > 1)
        return;
    int peer = 1 - rank;
    if (rank == 0) {
        OK(MPI_Ssend_c(out, 10, MPI_INT, peer, 5, MPI_COMM_WORLD));
        /* Buffered, with a buffer attached by Buffer_attach_c. */
        MPI_Count bsize = 10 * sizeof(int) + MPI_BSEND_OVERHEAD;
        char *buf = malloc(bsize);
        OK(MPI_Buffer_attach_c(buf, bsize));
        OK(MPI_Bsend_c(out, 10, MPI_INT, peer, 6, MPI_COMM_WORLD));
        void *got = NULL;
        MPI_Count gsize = -1;
        OK(MPI_Buffer_detach_c(&got, &gsize));
        CHECK(got == buf && gsize == bsize, "Buffer_detach_c: %p %lld", got, (long long)gsize);
        free(buf);
        OK(MPI_Send_c(out, 11, MPI_INT, peer, 7, MPI_COMM_WORLD));
        OK(MPI_Send_c(out, 12, MPI_INT, peer, 8, MPI_COMM_WORLD));
        int go;
        OK(MPI_Recv_c(&go, 1, MPI_INT, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Rsend_c(out, 13, MPI_INT, peer, 10, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv_c(in, 60, MPI_INT, peer, 5, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == 10 && in[9] == v(0, 9), "Ssend_c: %lld", (long long)c);
        OK(MPI_Recv_c(in, 60, MPI_INT, peer, 6, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == 10 && in[9] == v(0, 9), "Bsend_c: %lld", (long long)c);
        MPI_Message m;
        OK(MPI_Mprobe(peer, 7, MPI_COMM_WORLD, &m, &st));
        OK(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == 11, "Mprobe count %lld", (long long)c);
        OK(MPI_Mrecv_c(in, 60, MPI_INT, &m, &st));
        CHECK(m == MPI_MESSAGE_NULL && in[10] == v(0, 10), "Mrecv_c");
        int flag = 0;
        while (!flag)
            OK(MPI_Improbe(peer, 8, MPI_COMM_WORLD, &flag, &m, &st));
        MPI_Request r;
        OK(MPI_Imrecv_c(in, 60, MPI_INT, &m, &r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == 12 && in[11] == v(0, 11), "Imrecv_c: %lld", (long long)c);
        OK(MPI_Irecv_c(in, 60, MPI_INT, peer, 10, MPI_COMM_WORLD, &r));
        int go = 1;
        OK(MPI_Send_c(&go, 1, MPI_INT, peer, 9, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == 13 && in[12] == v(0, 12), "Rsend_c: %lld", (long long)c);
    }
}

/* A user function with an MPI_Count length: elementwise 2x2 matrix product (inout = in *
 * inout), non-commutative. */
static void matmul_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
    (void)dt;
    int *x = in, *y = inout;
    for (MPI_Count i = 0; i < *len; i++, x += 4, y += 4) {
        int r[4] = {x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3],
                    x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]};
        memcpy(y, r, sizeof r);
    }
}

static void collectives(void)
{
    const int N = 4;
    int n = size, *s = malloc(sizeof(int) * N * n * 3), *r = malloc(sizeof(int) * N * n * 3);
    MPI_Count *cn = malloc(sizeof(MPI_Count) * n), *cn2 = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *dp = malloc(sizeof(MPI_Aint) * n), *dp2 = malloc(sizeof(MPI_Aint) * n);
    MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * n);
    int sum[4], want;
#define FILL(buf, m, base)                                                                     \
    for (int i_ = 0; i_ < (m); i_++)                                                           \
    (buf)[i_] = (base) + i_
#define CLEAR(buf, m)                                                                          \
    for (int i_ = 0; i_ < (m); i_++)                                                           \
    (buf)[i_] = -1
    int root = n - 1;
    FILL(s, N, rank == root ? 500 : 0);
    OK(MPI_Bcast_c(s, N, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(s[0] == 500 && s[3] == 503, "Bcast_c %d", s[0]);
    FILL(s, N, v(rank, 0));
    OK(MPI_Reduce_c(s, sum, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    want = 0;
    for (int q = 0; q < n; q++)
        want += v(q, 3);
    if (rank == 0)
        CHECK(sum[3] == want, "Reduce_c %d, expected %d", sum[3], want);
    OK(MPI_Allreduce_c(s, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum[3] == want, "Allreduce_c %d", sum[3]);
    OK(MPI_Scan_c(s, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    int pre = 0;
    for (int q = 0; q < rank; q++)
        pre += v(q, 1);
    CHECK(sum[1] == pre + v(rank, 1), "Scan_c %d", sum[1]);
    OK(MPI_Exscan_c(s, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(rank == 0 || sum[1] == pre, "Exscan_c %d", sum[1]);

    CLEAR(r, N * n);
    OK(MPI_Gather_c(s, N, MPI_INT, r, N, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int k = 0; k < N * n; k++)
            CHECK(r[k] == v(k / N, k % N), "Gather_c element %d = %d", k, r[k]);
    CLEAR(r, N * n);
    OK(MPI_Allgather_c(s, N, MPI_INT, r, N, MPI_INT, MPI_COMM_WORLD));
    for (int k = 0; k < N * n; k++)
        CHECK(r[k] == v(k / N, k % N), "Allgather_c element %d = %d", k, r[k]);
    FILL(s, N * n, 700);
    OK(MPI_Scatter_c(s, N, MPI_INT, r, N, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(r[0] == 700 + rank * N && r[3] == 703 + rank * N, "Scatter_c %d", r[0]);
    FILL(s, N * n, v(rank, 0));
    OK(MPI_Alltoall_c(s, N, MPI_INT, r, N, MPI_INT, MPI_COMM_WORLD));
    for (int k = 0; k < N * n; k++)
        CHECK(r[k] == v(k / N, rank * N + k % N), "Alltoall_c element %d = %d", k, r[k]);

    /* v-variants: rank q has q % 3 + 1 elements, placed in reverse order. */
    MPI_Aint tot = 0;
    for (int q = n - 1; q >= 0; q--) {
        cn[q] = q % 3 + 1;
        dp[q] = tot;
        tot += cn[q];
    }
    FILL(s, 3, v(rank, 0));
    CLEAR(r, tot);
    OK(MPI_Gatherv_c(s, cn[rank], MPI_INT, r, cn, dp, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int q = 0; q < n; q++)
            CHECK(r[dp[q] + cn[q] - 1] == v(q, cn[q] - 1), "Gatherv_c from %d", q);
    CLEAR(r, tot);
    OK(MPI_Allgatherv_c(s, cn[rank], MPI_INT, r, cn, dp, MPI_INT, MPI_COMM_WORLD));
    for (int q = 0; q < n; q++)
        CHECK(r[dp[q]] == v(q, 0) && r[dp[q] + cn[q] - 1] == v(q, cn[q] - 1),
              "Allgatherv_c from %d", q);
    FILL(s, tot, 900);
    CLEAR(r, 3);
    OK(MPI_Scatterv_c(s, cn, dp, MPI_INT, r, cn[rank], MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(r[cn[rank] - 1] == 900 + dp[rank] + cn[rank] - 1, "Scatterv_c %d", r[0]);
    /* Alltoallv_c and alltoallw_c: (me + d) % 2 + 1 elements from me to d. */
    MPI_Aint so = 0, ro = 0;
    for (int d = 0; d < n; d++) {
        cn[d] = (rank + d) % 2 + 1;
        dp[d] = so;
        so += cn[d];
        cn2[d] = (d + rank) % 2 + 1;
        dp2[d] = ro;
        ro += cn2[d];
        ty[d] = MPI_INT;
    }
    FILL(s, so, v(rank, 0));
    CLEAR(r, ro);
    OK(MPI_Alltoallv_c(s, cn, dp, MPI_INT, r, cn2, dp2, MPI_INT, MPI_COMM_WORLD));
    for (int q = 0; q < n; q++) {
        int from = 0;
        for (int d = 0; d < rank; d++)
            from += (q + d) % 2 + 1;
        CHECK(r[dp2[q]] == v(q, from), "Alltoallv_c from %d: %d", q, r[dp2[q]]);
    }
    for (int d = 0; d < n; d++) {
        dp[d] *= sizeof(int);
        dp2[d] *= sizeof(int);
    }
    CLEAR(r, ro);
    OK(MPI_Alltoallw_c(s, cn, dp, ty, r, cn2, dp2, ty, MPI_COMM_WORLD));
    for (int q = 0; q < n; q++) {
        int from = 0;
        for (int d = 0; d < rank; d++)
            from += (q + d) % 2 + 1;
        CHECK(r[dp2[q] / sizeof(int)] == v(q, from), "Alltoallw_c from %d", q);
    }
    /* Reduce_scatter_c: rank q gets q % 2 + 1 elements. */
    MPI_Aint off = 0;
    tot = 0;
    for (int q = 0; q < n; q++) {
        cn[q] = q % 2 + 1;
        off += q < rank ? cn[q] : 0;
        tot += cn[q];
    }
    FILL(s, tot, v(rank, 0));
    OK(MPI_Reduce_scatter_c(s, r, cn, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    want = 0;
    for (int q = 0; q < n; q++)
        want += v(q, off);
    CHECK(r[0] == want, "Reduce_scatter_c %d, expected %d", r[0], want);
    FILL(s, 2 * n, v(rank, 0));
    OK(MPI_Reduce_scatter_block_c(s, r, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    want = 0;
    for (int q = 0; q < n; q++)
        want += v(q, 2 * rank + 1);
    CHECK(r[1] == want, "Reduce_scatter_block_c %d", r[1]);

    /* Nonblocking ones, outstanding together. */
    MPI_Request q[4];
    int b[2] = {rank == 0 ? 42 : 0, rank == 0 ? 43 : 0}, one = 1, count = 0;
    for (int k = 0; k < n; k++) {
        cn[k] = 1;
        dp[k] = k;
        cn2[k] = 1;
        dp2[k] = n - 1 - k;
    }
    FILL(s, n, v(rank, 0));
    CLEAR(r, 2 * n);
    OK(MPI_Ibcast_c(b, 2, MPI_INT, 0, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Iallreduce_c(&one, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Igatherv_c(s, 1, MPI_INT, r, cn2, dp2, MPI_INT, 0, MPI_COMM_WORLD, &q[2]));
    OK(MPI_Ialltoallv_c(s, cn, dp, MPI_INT, r + n, cn, dp, MPI_INT, MPI_COMM_WORLD, &q[3]));
    MPI_Status sts[4];
    OK(MPI_Waitall(4, q, sts));
    CHECK(b[1] == 43 && count == n, "Ibcast_c %d, Iallreduce_c %d", b[1], count);
    if (rank == 0)
        CHECK(r[n - 1] == v(0, 0) && r[0] == v(n - 1, 0), "Igatherv_c %d %d", r[0], r[n - 1]);
    for (int k = 0; k < n; k++)
        CHECK(r[n + k] == v(k, rank), "Ialltoallv_c from %d: %d", k, r[n + k]);

    /* A user operation with a large-count function. */
    MPI_Op op;
    MPI_Datatype mat;
    OK(MPI_Op_create_c(matmul_c, 0, &op));
    OK(MPI_Type_contiguous_c(4, MPI_INT, &mat));
    OK(MPI_Type_commit(&mat));
    int m[4] = {rank + 1, 1, 1, 0}, p[4], w[4] = {1, 1, 1, 0};
    OK(MPI_Allreduce_c(m, p, 1, mat, op, MPI_COMM_WORLD));
    for (int k = 1; k < n; k++) {
        int x[4] = {k + 1, 1, 1, 0};
        MPI_Count len = 1;
        matmul_c(w, x, &len, &mat);
        memcpy(w, x, sizeof w);
    }
    CHECK(memcmp(p, w, sizeof w) == 0, "Allreduce_c with Op_create_c: {%d %d %d %d}", p[0],
          p[1], p[2], p[3]);
    int a2[8] = {2, 0, 0, 2, 1, 2, 3, 4}, b2[8] = {1, 2, 3, 4, 0, 1, 1, 0};
    OK(MPI_Reduce_local_c(a2, b2, 2, mat, op));
    CHECK(b2[0] == 2 && b2[3] == 8 && b2[4] == 2 && b2[5] == 1 && b2[6] == 4 && b2[7] == 3,
          "Reduce_local_c {%d %d %d %d} {%d %d %d %d}", b2[0], b2[1], b2[2], b2[3], b2[4],
          b2[5], b2[6], b2[7]);
    OK(MPI_Op_free(&op));
    OK(MPI_Type_free(&mat));
    free(s);
    free(r);
    free(cn);
    free(cn2);
    free(dp);
    free(dp2);
    free(ty);
}

static void packed_as(MPI_Datatype t, const int *src, const int *want, int n, const char *what)
{
    int out[32];
    MPI_Count pos = 0, ps = -1;
    OK(MPI_Type_commit(&t));
    OK(MPI_Pack_size_c(1, t, MPI_COMM_WORLD, &ps));
    OK(MPI_Pack_c(src, 1, t, out, sizeof out, &pos, MPI_COMM_WORLD));
    CHECK(pos == n * (MPI_Count)sizeof(int) && ps >= pos, "%s: packed %lld bytes (size %lld)",
          what, (long long)pos, (long long)ps);
    for (int i = 0; i < n; i++)
        CHECK(out[i] == want[i], "%s: element %d is %d, expected %d", what, i, out[i], want[i]);
    int back[32];
    for (int i = 0; i < 32; i++)
        back[i] = -1;
    pos = 0;
    OK(MPI_Unpack_c(out, n * sizeof(int), &pos, back, 1, t, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++)
        CHECK(back[want[i]] == want[i], "%s: unpacked element %d", what, want[i]);
    OK(MPI_Type_free(&t));
}

static void datatypes(void)
{
    int a[32];
    for (int i = 0; i < 32; i++)
        a[i] = i;
    MPI_Datatype t;
    OK(MPI_Type_contiguous_c(3, MPI_INT, &t));
    packed_as(t, a, (int[]){0, 1, 2}, 3, "contiguous_c");
    OK(MPI_Type_vector_c(3, 2, 4, MPI_INT, &t));
    packed_as(t, a, (int[]){0, 1, 4, 5, 8, 9}, 6, "vector_c");
    OK(MPI_Type_create_hvector_c(2, 3, 20, MPI_INT, &t));
    packed_as(t, a, (int[]){0, 1, 2, 5, 6, 7}, 6, "create_hvector_c");
    OK(MPI_Type_indexed_c(2, (MPI_Count[]){2, 1}, (MPI_Count[]){6, 1}, MPI_INT, &t));
    packed_as(t, a, (int[]){6, 7, 1}, 3, "indexed_c");
    OK(MPI_Type_create_hindexed_c(2, (MPI_Count[]){1, 2}, (MPI_Count[]){40, 8}, MPI_INT, &t));
    packed_as(t, a, (int[]){10, 2, 3}, 3, "create_hindexed_c");
    MPI_Datatype st[2] = {MPI_INT, MPI_INT};
    OK(MPI_Type_create_struct_c(2, (MPI_Count[]){1, 2}, (MPI_Count[]){12, 80}, st, &t));
    packed_as(t, a, (int[]){3, 20, 21}, 3, "create_struct_c");
    OK(MPI_Type_create_subarray_c(2, (MPI_Count[]){4, 8}, (MPI_Count[]){2, 2},
                                  (MPI_Count[]){1, 3}, MPI_ORDER_C, MPI_INT, &t));
    packed_as(t, a, (int[]){11, 12, 19, 20}, 4, "create_subarray_c");
    MPI_Datatype base;
    OK(MPI_Type_contiguous_c(2, MPI_INT, &base));
    OK(MPI_Type_create_resized_c(base, -4, 12, &t));
    OK(MPI_Type_commit(&t));
    MPI_Count lb, ext, tlb, text, sz;
    OK(MPI_Type_size_c(t, &sz));
    OK(MPI_Type_get_extent_c(t, &lb, &ext));
    OK(MPI_Type_get_true_extent_c(t, &tlb, &text));
    CHECK(sz == 8 && lb == -4 && ext == 12 && tlb == 0 && text == 8,
          "resized_c: size %lld lb %lld extent %lld true %lld %lld", (long long)sz,
          (long long)lb, (long long)ext, (long long)tlb, (long long)text);
    /* Envelope and contents of a large-count type: the counts are large counts. */
    MPI_Count ni, na, nc, nd;
    int comb;
    MPI_Datatype vt;
    OK(MPI_Type_vector_c(3, 2, 4, MPI_INT, &vt));
    OK(MPI_Type_get_envelope_c(vt, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 0 && na == 0 && nc == 3 && nd == 1,
          "vector_c envelope %lld %lld %lld %lld combiner %d", (long long)ni, (long long)na,
          (long long)nc, (long long)nd, comb);
    int ints[1];
    MPI_Aint ai[1];
    MPI_Count cc[3];
    MPI_Datatype dd[1];
    OK(MPI_Type_get_contents_c(vt, ni, na, nc, nd, ints, ai, cc, dd));
    CHECK(cc[0] == 3 && cc[1] == 2 && cc[2] == 4 && dd[0] == MPI_INT, "vector_c contents");
    OK(MPI_Type_get_envelope_c(base, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && nc == 1 && nd == 1, "contiguous_c envelope");
    OK(MPI_Type_free(&vt));
    OK(MPI_Type_free(&t));
    OK(MPI_Type_free(&base));
    /* 2^33 bytes: sizes only (nothing is allocated). */
    MPI_Count big = (MPI_Count)1 << 33;
    OK(MPI_Type_contiguous_c(big, MPI_BYTE, &t));
    OK(MPI_Type_size_c(t, &sz));
    OK(MPI_Type_get_extent_c(t, &lb, &ext));
    int small = 0;
    OK(MPI_Type_size(t, &small));
    CHECK(sz == big && ext == big && lb == 0 && small == MPI_UNDEFINED,
          "2^33 bytes: size_c %lld extent %lld size %d", (long long)sz, (long long)ext, small);
    OK(MPI_Type_free(&t));
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks");
    p2p();
    collectives();
    datatypes();
    test_pass("large_count");
    return 0;
}
