/*
 * Process topologies: MPI_Dims_create (MPICH 4.0.2's answers for many cases, and its
 * errors); MPI_Cart_create (periodic and not, reorder 0 and 1, a grid smaller than the
 * communicator leaving MPI_COMM_NULL on the rest, zero dimensions, a grid too big),
 * Cart_get, Cartdim_get, Cart_coords, Cart_rank (out-of-range coordinates wrap in periodic
 * dimensions, are errors in the others), Cart_shift (MPI_PROC_NULL at the edges of
 * non-periodic dimensions), Cart_sub, Cart_map; MPI_Graph_create, Graph_get, Graphdims_get,
 * Graph_neighbors(_count), Graph_map; MPI_Dist_graph_create_adjacent and
 * MPI_Dist_graph_create, weighted and MPI_UNWEIGHTED, with Dist_graph_neighbors(_count);
 * MPI_Topo_test on each kind and on a plain communicator (MPI_UNDEFINED); the topology
 * kept by MPI_Comm_dup. Errors under MPI_ERRORS_RETURN. Any number of ranks (1-6 tested).
 */
#include "check.h"

static int rank, size;

/* MPI_Dims_create: nnodes, ndims, the dims passed in, and MPICH 4.0.2's answers (observed
 * with MPICH 4.0.2 on Debian; MPI fixes only that the dims are as close as possible and
 * non-increasing, so these are the exact values MPICH gives). */
static const struct {
    int nnodes, ndims, in[5], out[5];
} dims_cases[] = {
    {1, 1, {0}, {1}},
    {1, 2, {0, 0}, {1, 1}},
    {2, 2, {0, 0}, {2, 1}},
    {4, 2, {0, 0}, {2, 2}},
    {6, 2, {0, 0}, {3, 2}},
    {7, 2, {0, 0}, {7, 1}},
    {12, 2, {0, 0}, {4, 3}},
    {16, 2, {0, 0}, {4, 4}},
    {24, 3, {0, 0, 0}, {4, 3, 2}},
    {30, 3, {0, 0, 0}, {5, 3, 2}},
    {60, 3, {0, 0, 0}, {5, 4, 3}},
    {64, 3, {0, 0, 0}, {4, 4, 4}},
    {100, 2, {0, 0}, {10, 10}},
    {120, 4, {0, 0, 0, 0}, {5, 4, 3, 2}},
    {1000, 3, {0, 0, 0}, {10, 10, 10}},
    {1024, 4, {0, 0, 0, 0}, {8, 8, 4, 4}},
    {97, 2, {0, 0}, {97, 1}},
    {36, 2, {0, 0}, {6, 6}},
    {18, 3, {0, 0, 0}, {3, 3, 2}},
    {8, 3, {0, 0, 0}, {2, 2, 2}},
    {6, 3, {0, 0, 0}, {3, 2, 1}},
    {12, 3, {0, 3, 0}, {2, 3, 2}},
    {24, 3, {2, 0, 0}, {2, 4, 3}},
    {24, 3, {0, 0, 4}, {3, 2, 4}},
    {12, 2, {12, 0}, {12, 1}},
    {12, 2, {0, 12}, {1, 12}},
    {12, 2, {3, 4}, {3, 4}},
    {16, 4, {2, 0, 0, 2}, {2, 2, 2, 2}},
    {5, 1, {0}, {5}},
    {5, 1, {5}, {5}},
    {30, 4, {0, 0, 0, 0}, {5, 3, 2, 1}},
    {210, 4, {0, 0, 0, 0}, {7, 5, 3, 2}},
    {256, 3, {0, 0, 0}, {8, 8, 4}},
    {48, 3, {0, 0, 0}, {4, 4, 3}},
    {45, 2, {0, 0}, {9, 5}},
    {90, 3, {0, 0, 0}, {6, 5, 3}},
    {32, 5, {0, 0, 0, 0, 0}, {2, 2, 2, 2, 2}},
    {2, 3, {0, 0, 0}, {2, 1, 1}},
    {9, 2, {0, 0}, {3, 3}},
    {27, 3, {0, 0, 0}, {3, 3, 3}},
    {50, 3, {0, 0, 0}, {5, 5, 2}},
    {11, 3, {0, 0, 0}, {11, 1, 1}},
    {720, 3, {0, 0, 0}, {10, 9, 8}},
    {20, 3, {0, 2, 0}, {5, 2, 2}},
    {72, 4, {0, 3, 0, 0}, {4, 3, 3, 2}},
};

static void dims_create(void)
{
    for (size_t i = 0; i < sizeof dims_cases / sizeof dims_cases[0]; i++) {
        int d[5];
        memcpy(d, dims_cases[i].in, sizeof d);
        OK(MPI_Dims_create(dims_cases[i].nnodes, dims_cases[i].ndims, d));
        for (int k = 0; k < dims_cases[i].ndims; k++)
            CHECK(d[k] == dims_cases[i].out[k],
                  "Dims_create(%d, %d): dims[%d] = %d, MPICH gives %d", dims_cases[i].nnodes,
                  dims_cases[i].ndims, k, d[k], dims_cases[i].out[k]);
    }
    /* Preset dims that do not divide nnodes, and negative ones, are MPI_ERR_DIMS. */
    int bad1[2] = {5, 0}, bad2[2] = {3, 3}, bad3[2] = {-1, 0};
    FAILS(MPI_ERR_DIMS, MPI_Dims_create(12, 2, bad1));
    FAILS(MPI_ERR_DIMS, MPI_Dims_create(12, 2, bad2));
    FAILS(MPI_ERR_DIMS, MPI_Dims_create(8, 2, bad3));
}

static void check_topo(MPI_Comm c, int want, const char *what)
{
    int t = -1;
    OK(MPI_Topo_test(c, &t));
    CHECK(t == want, "Topo_test of %s: %d, expected %d", what, t, want);
}

/* A 2-D grid over all ranks: dims from Dims_create, dimension 0 periodic, 1 not. */
static void cartesian(void)
{
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    OK(MPI_Dims_create(size, 2, dims));
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    OK(MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN));
    check_topo(cart, MPI_CART, "a Cartesian communicator");
    int nd = -1, d[2], p[2], c[2], r;
    OK(MPI_Cartdim_get(cart, &nd));
    OK(MPI_Cart_get(cart, 2, d, p, c));
    OK(MPI_Comm_rank(cart, &r));
    /* Row-major: the last dimension varies fastest. */
    CHECK(nd == 2 && d[0] == dims[0] && d[1] == dims[1] && p[0] == 1 && p[1] == 0 &&
              r == rank && c[0] == rank / dims[1] && c[1] == rank % dims[1],
          "Cart_get: ndims %d dims %dx%d periods %d%d coords (%d,%d) rank %d", nd, d[0], d[1],
          p[0], p[1], c[0], c[1], r);
    for (int q = 0; q < size; q++) {
        int cc[2], back = -1;
        OK(MPI_Cart_coords(cart, q, 2, cc));
        OK(MPI_Cart_rank(cart, cc, &back));
        CHECK(cc[0] == q / dims[1] && cc[1] == q % dims[1] && back == q,
              "rank %d has coordinates (%d,%d), and back %d", q, cc[0], cc[1], back);
    }
    /* Out of range: wraps in the periodic dimension 0, an error in dimension 1. */
    int wrap[2] = {c[0] - dims[0], c[1]}, wrap2[2] = {c[0] + 3 * dims[0], c[1]}, w = -1;
    OK(MPI_Cart_rank(cart, wrap, &w));
    CHECK(w == rank, "coordinates (%d,%d) wrap to %d, not %d", wrap[0], wrap[1], w, rank);
    OK(MPI_Cart_rank(cart, wrap2, &w));
    CHECK(w == rank, "coordinates (%d,%d) wrap to %d, not %d", wrap2[0], wrap2[1], w, rank);
    int out1[2] = {0, dims[1]}, out2[2] = {0, -1};
    FAILS(MPI_ERR_ARG, MPI_Cart_rank(cart, out1, &w));
    FAILS(MPI_ERR_ARG, MPI_Cart_rank(cart, out2, &w));
    FAILS(MPI_ERR_RANK, MPI_Cart_coords(cart, size, 2, c));
    int src, dst;
    FAILS(MPI_ERR_ARG, MPI_Cart_shift(cart, 2, 1, &src, &dst));

    /* Shifts: periodic dimension 0 wraps, dimension 1 has MPI_PROC_NULL at its edges. */
    for (int disp = -2; disp <= 3; disp++) {
        OK(MPI_Cart_shift(cart, 0, disp, &src, &dst));
        int ws = (((c[0] - disp) % dims[0] + dims[0]) % dims[0]) * dims[1] + c[1];
        int wd = (((c[0] + disp) % dims[0] + dims[0]) % dims[0]) * dims[1] + c[1];
        CHECK(src == ws && dst == wd, "shift dim 0 by %d: %d/%d, expected %d/%d", disp, src,
              dst, ws, wd);
        OK(MPI_Cart_shift(cart, 1, disp, &src, &dst));
        ws = c[1] - disp >= 0 && c[1] - disp < dims[1] ? c[0] * dims[1] + c[1] - disp
                                                       : MPI_PROC_NULL;
        wd = c[1] + disp >= 0 && c[1] + disp < dims[1] ? c[0] * dims[1] + c[1] + disp
                                                       : MPI_PROC_NULL;
        CHECK(src == ws && dst == wd, "shift dim 1 by %d: %d/%d, expected %d/%d", disp, src,
              dst, ws, wd);
    }

    /* Cart_sub: the rows (dimension 1 kept) and the columns (dimension 0 kept). */
    int keep1[2] = {0, 1}, keep0[2] = {1, 0}, none[2] = {0, 0};
    MPI_Comm row, col, point;
    OK(MPI_Cart_sub(cart, keep1, &row));
    OK(MPI_Cart_sub(cart, keep0, &col));
    int rr, rn, cr, cn, sd, sp, sc;
    OK(MPI_Comm_rank(row, &rr));
    OK(MPI_Comm_size(row, &rn));
    OK(MPI_Comm_rank(col, &cr));
    OK(MPI_Comm_size(col, &cn));
    CHECK(rr == c[1] && rn == dims[1] && cr == c[0] && cn == dims[0],
          "Cart_sub: row rank %d of %d, column rank %d of %d", rr, rn, cr, cn);
    OK(MPI_Cart_get(col, 1, &sd, &sp, &sc));
    CHECK(sd == dims[0] && sp == 1 && sc == c[0], "column Cart_get %d %d %d", sd, sp, sc);
    OK(MPI_Cart_get(row, 1, &sd, &sp, &sc));
    CHECK(sd == dims[1] && sp == 0 && sc == c[1], "row Cart_get %d %d %d", sd, sp, sc);
    int sum = 0;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, row));
    int want = 0;
    for (int k = 0; k < dims[1]; k++)
        want += c[0] * dims[1] + k;
    CHECK(sum == want, "sum over the row %d, expected %d", sum, want);
    /* Nothing kept: a zero-dimensional grid of one process (MPICH 4.0.2 gives it only to
     * rank 0 and MPI_COMM_NULL to the others, so only rank 0 is checked). */
    OK(MPI_Cart_sub(cart, none, &point));
    if (rank == 0 || point != MPI_COMM_NULL) {
        int pn = -1, pd = -1;
        CHECK(point != MPI_COMM_NULL, "Cart_sub keeping nothing gave MPI_COMM_NULL on rank 0");
        OK(MPI_Comm_size(point, &pn));
        OK(MPI_Cartdim_get(point, &pd));
        CHECK(pn == 1 && pd == 0, "Cart_sub keeping nothing: size %d ndims %d", pn, pd);
        OK(MPI_Comm_free(&point));
    }

    /* A dup keeps the topology. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(cart, &dup));
    check_topo(dup, MPI_CART, "a dup of a Cartesian communicator");
    OK(MPI_Cart_get(dup, 2, d, p, c));
    CHECK(d[0] == dims[0] && d[1] == dims[1] && p[0] == 1 && p[1] == 0, "dup's Cart_get");
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&row));
    OK(MPI_Comm_free(&col));
    OK(MPI_Comm_free(&cart));

    /* A 1-D periodic ring over size - 1 ranks: the last rank gets MPI_COMM_NULL. */
    if (size > 1) {
        int n1 = size - 1, per = 1;
        MPI_Comm ring;
        OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &n1, &per, 0, &ring));
        if (rank == size - 1) {
            CHECK(ring == MPI_COMM_NULL, "the rank outside the grid got a communicator");
        } else {
            int rs, rrk;
            OK(MPI_Comm_size(ring, &rs));
            OK(MPI_Comm_rank(ring, &rrk));
            OK(MPI_Cart_shift(ring, 0, 1, &src, &dst));
            CHECK(rs == n1 && rrk == rank && src == (rank + n1 - 1) % n1 &&
                      dst == (rank + 1) % n1,
                  "ring of %d: rank %d neighbors %d %d", rs, rrk, src, dst);
            OK(MPI_Comm_free(&ring));
        }
    }
    /* Reorder allowed, 3-D: ranks may move, but coordinates and ranks agree. */
    int d3[3] = {0, 0, 0}, p3[3] = {0, 1, 0};
    OK(MPI_Dims_create(size, 3, d3));
    MPI_Comm cube;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 3, d3, p3, 1, &cube));
    int cr3, c3[3], g3[3], pp3[3], back;
    OK(MPI_Comm_rank(cube, &cr3));
    OK(MPI_Cart_get(cube, 3, g3, pp3, c3));
    OK(MPI_Cart_rank(cube, c3, &back));
    CHECK(back == cr3 && c3[0] == cr3 / (d3[1] * d3[2]) && c3[2] == cr3 % d3[2] &&
              pp3[1] == 1 && pp3[0] == 0,
          "3-D grid: rank %d at (%d,%d,%d), back %d", cr3, c3[0], c3[1], c3[2], back);
    int ranks_sum = 0;
    OK(MPI_Allreduce(&cr3, &ranks_sum, 1, MPI_INT, MPI_SUM, cube));
    CHECK(ranks_sum == size * (size - 1) / 2, "reordered ranks are a permutation");
    OK(MPI_Comm_free(&cube));

    /* Zero dimensions: one process, the rest MPI_COMM_NULL. */
    MPI_Comm zero;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &zero));
    if (rank == 0) {
        int zn = -1, zd = -1;
        OK(MPI_Comm_size(zero, &zn));
        OK(MPI_Cartdim_get(zero, &zd));
        CHECK(zn == 1 && zd == 0, "zero-dimensional grid: size %d ndims %d", zn, zd);
        OK(MPI_Comm_free(&zero));
    } else {
        CHECK(zero == MPI_COMM_NULL, "zero-dimensional grid on rank %d", rank);
    }
    /* More grid points than processes. */
    int toobig[2] = {size + 1, 1};
    FAILS(MPI_ERR_ARG, MPI_Cart_create(MPI_COMM_WORLD, 2, toobig, periods, 0, &zero));

    /* Cart_map: identity for the first ranks, MPI_UNDEFINED beyond the grid. */
    int m1 = (size + 1) / 2, mr;
    OK(MPI_Cart_map(MPI_COMM_WORLD, 1, &m1, periods, &mr));
    CHECK(mr == (rank < m1 ? rank : MPI_UNDEFINED), "Cart_map gave %d", mr);
}

/* Neighbors of node i in a ring with a chord: i+1, i-1, i+n/2, without self or repeats. */
static int ring_nbrs(int i, int n, int *out)
{
    int cand[3] = {(i + 1) % n, (i + n - 1) % n, (i + n / 2) % n}, k = 0;
    for (int a = 0; a < 3; a++) {
        int dup = cand[a] == i;
        for (int b = 0; b < k; b++)
            dup |= out[b] == cand[a];
        if (!dup)
            out[k++] = cand[a];
    }
    return k;
}

static void graph(void)
{
    int *index = malloc(sizeof(int) * size), *edges = malloc(sizeof(int) * 3 * size), ne = 0;
    for (int i = 0; i < size; i++) {
        ne += ring_nbrs(i, size, edges + ne);
        index[i] = ne;
    }
    MPI_Comm g;
    OK(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g));
    check_topo(g, MPI_GRAPH, "a graph communicator");
    int nn = -1, nedges = -1;
    OK(MPI_Graphdims_get(g, &nn, &nedges));
    CHECK(nn == size && nedges == ne, "Graphdims_get %d %d, expected %d %d", nn, nedges, size,
          ne);
    int *gi = malloc(sizeof(int) * size), *ge = malloc(sizeof(int) * (ne + 1));
    OK(MPI_Graph_get(g, size, ne, gi, ge));
    for (int i = 0; i < size; i++)
        CHECK(gi[i] == index[i], "Graph_get index[%d] = %d, expected %d", i, gi[i], index[i]);
    for (int i = 0; i < ne; i++)
        CHECK(ge[i] == edges[i], "Graph_get edges[%d] = %d, expected %d", i, ge[i], edges[i]);
    for (int q = 0; q < size; q++) {
        int cnt = -1, nb[3], want[3], wn = ring_nbrs(q, size, want);
        OK(MPI_Graph_neighbors_count(g, q, &cnt));
        CHECK(cnt == wn, "node %d has %d neighbors, expected %d", q, cnt, wn);
        OK(MPI_Graph_neighbors(g, q, 3, nb));
        for (int k = 0; k < wn; k++)
            CHECK(nb[k] == want[k], "node %d neighbor %d is %d, expected %d", q, k, nb[k],
                  want[k]);
    }
    MPI_Comm dup;
    OK(MPI_Comm_dup(g, &dup));
    check_topo(dup, MPI_GRAPH, "a dup of a graph communicator");
    OK(MPI_Graphdims_get(dup, &nn, &nedges));
    CHECK(nn == size && nedges == ne, "dup's Graphdims_get %d %d", nn, nedges);
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&g));

    /* A graph of the first size - 1 ranks: the last gets MPI_COMM_NULL. Graph_map. */
    if (size > 1) {
        int n1 = size - 1, e1 = 0;
        for (int i = 0; i < n1; i++) {
            e1 += ring_nbrs(i, n1, edges + e1);
            index[i] = e1;
        }
        OK(MPI_Graph_create(MPI_COMM_WORLD, n1, index, edges, 0, &g));
        CHECK((g == MPI_COMM_NULL) == (rank == size - 1), "graph of %d nodes on rank %d", n1,
              rank);
        if (g != MPI_COMM_NULL)
            OK(MPI_Comm_free(&g));
        int mr;
        OK(MPI_Graph_map(MPI_COMM_WORLD, n1, index, edges, &mr));
        CHECK(mr == (rank < n1 ? rank : MPI_UNDEFINED), "Graph_map gave %d", mr);
    }
    free(index);
    free(edges);
    free(gi);
    free(ge);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static void dist_graph(void)
{
    /* Adjacent: sources left and left-chord, destinations right and right-chord, weighted;
     * the lists come back in the order given. */
    int h = size / 2, l = (rank + size - 1) % size, r = (rank + 1) % size;
    int srcs[2] = {l, (rank + size - h) % size}, dsts[2] = {r, (rank + h) % size};
    int sw[2] = {10 * srcs[0] + rank, 10 * srcs[1] + rank + 1},
        dw[2] = {10 * rank + dsts[0], 10 * rank + dsts[1] + 1};
    MPI_Comm dg;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, sw, 2, dsts, dw, MPI_INFO_NULL,
                                      0, &dg));
    check_topo(dg, MPI_DIST_GRAPH, "a distributed graph communicator");
    int in = -1, out = -1, wt = -1;
    OK(MPI_Dist_graph_neighbors_count(dg, &in, &out, &wt));
    CHECK(in == 2 && out == 2 && wt, "adjacent: in %d out %d weighted %d", in, out, wt);
    int gs[2], gsw[2], gd[2], gdw[2];
    OK(MPI_Dist_graph_neighbors(dg, 2, gs, gsw, 2, gd, gdw));
    for (int k = 0; k < 2; k++)
        CHECK(gs[k] == srcs[k] && gsw[k] == sw[k] && gd[k] == dsts[k] && gdw[k] == dw[k],
              "adjacent neighbor %d: source %d (%d) weight %d (%d), destination %d (%d) weight "
              "%d (%d)",
              k, gs[k], srcs[k], gsw[k], sw[k], gd[k], dsts[k], gdw[k], dw[k]);
    MPI_Comm dup;
    OK(MPI_Comm_dup(dg, &dup));
    check_topo(dup, MPI_DIST_GRAPH, "a dup of a distributed graph communicator");
    OK(MPI_Dist_graph_neighbors_count(dup, &in, &out, &wt));
    CHECK(in == 2 && out == 2 && wt, "dup: in %d out %d weighted %d", in, out, wt);
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&dg));

    /* Unweighted adjacent: a rank with no edges at all is allowed. */
    int none = rank == 0 && size > 1;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, none ? 0 : 1, &l, MPI_UNWEIGHTED,
                                      none ? 0 : 1, &r, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg));
    OK(MPI_Dist_graph_neighbors_count(dg, &in, &out, &wt));
    CHECK(in == !none && out == !none && !wt, "unweighted: in %d out %d weighted %d", in, out,
          wt);
    OK(MPI_Comm_free(&dg));

    /* General: rank q describes the out-edges of rank q+1 (right and right-chord, weight
     * 100 * source + destination); every rank learns its own in- and out-neighbors. */
    int who = (rank + 1) % size, deg = 2, gdst[2] = {(who + 1) % size, (who + h) % size};
    int gwt[2] = {100 * who + gdst[0], 100 * who + gdst[1]};
    OK(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &who, &deg, gdst, gwt, MPI_INFO_NULL, 0, &dg));
    OK(MPI_Dist_graph_neighbors_count(dg, &in, &out, &wt));
    CHECK(in == 2 && out == 2 && wt, "general: in %d out %d weighted %d", in, out, wt);
    OK(MPI_Dist_graph_neighbors(dg, 2, gs, gsw, 2, gd, gdw));
    /* The order is not defined: compare sorted, and each weight with its edge. */
    for (int k = 0; k < 2; k++) {
        CHECK(gsw[k] == 100 * gs[k] + rank, "in-edge from %d has weight %d", gs[k], gsw[k]);
        CHECK(gdw[k] == 100 * rank + gd[k], "out-edge to %d has weight %d", gd[k], gdw[k]);
    }
    int ws[2] = {l, (rank + size - h) % size}, wd[2] = {r, (rank + h) % size};
    qsort(gs, 2, sizeof(int), cmp_int);
    qsort(gd, 2, sizeof(int), cmp_int);
    qsort(ws, 2, sizeof(int), cmp_int);
    qsort(wd, 2, sizeof(int), cmp_int);
    CHECK(gs[0] == ws[0] && gs[1] == ws[1] && gd[0] == wd[0] && gd[1] == wd[1],
          "general: sources %d %d (want %d %d) destinations %d %d (want %d %d)", gs[0], gs[1],
          ws[0], ws[1], gd[0], gd[1], wd[0], wd[1]);
    OK(MPI_Comm_free(&dg));

    /* General, all edges given by rank 0, unweighted: a ring. */
    int *all = malloc(sizeof(int) * size), *ones = malloc(sizeof(int) * size),
        *to = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) {
        all[q] = q;
        ones[q] = 1;
        to[q] = (q + 1) % size;
    }
    OK(MPI_Dist_graph_create(MPI_COMM_WORLD, rank == 0 ? size : 0, all, ones, to,
                             MPI_UNWEIGHTED, MPI_INFO_NULL, 1, &dg));
    check_topo(dg, MPI_DIST_GRAPH, "a distributed graph made by rank 0");
    OK(MPI_Dist_graph_neighbors_count(dg, &in, &out, &wt));
    CHECK(in == 1 && out == 1 && !wt, "ring from rank 0: in %d out %d weighted %d", in, out,
          wt);
    /* Reordering was allowed: the neighbors are given in the new communicator's ranks. */
    int me, n1, n2;
    OK(MPI_Comm_rank(dg, &me));
    OK(MPI_Dist_graph_neighbors(dg, 1, &n1, MPI_UNWEIGHTED, 1, &n2, MPI_UNWEIGHTED));
    int left_world = -1, right_world = -1;
    MPI_Group wg, dgg;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Comm_group(dg, &dgg));
    OK(MPI_Group_translate_ranks(dgg, 1, &n1, wg, &left_world));
    OK(MPI_Group_translate_ranks(dgg, 1, &n2, wg, &right_world));
    int my_world = -1;
    OK(MPI_Group_translate_ranks(dgg, 1, &me, wg, &my_world));
    CHECK(left_world == (my_world + size - 1) % size && right_world == (my_world + 1) % size,
          "ring from rank 0: world rank %d has neighbors %d %d", my_world, left_world,
          right_world);
    OK(MPI_Group_free(&wg));
    OK(MPI_Group_free(&dgg));
    OK(MPI_Comm_free(&dg));
    free(all);
    free(ones);
    free(to);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    check_topo(MPI_COMM_WORLD, MPI_UNDEFINED, "MPI_COMM_WORLD");
    MPI_Comm plain;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &plain));
    check_topo(plain, MPI_UNDEFINED, "a dup of MPI_COMM_WORLD");
    OK(MPI_Comm_free(&plain));
    dims_create();
    cartesian();
    graph();
    dist_graph();
    test_pass("topo");
    return 0;
}
