/*
 * Collectives: barrier, bcast, reduce, allreduce, gather(v), scatter(v), allgather(v),
 * alltoall(v), reduce_scatter(_block), scan, exscan, each with MPI_IN_PLACE where MPI
 * allows it; predefined operations (including MINLOC/MAXLOC on value/index pairs),
 * user operations (commutative and not, MPI_Op_create/free/commutative,
 * MPI_Reduce_local); a non-contiguous datatype in a rooted and a reducing collective; a
 * split communicator. Any number of ranks.
 */
#include "check.h"
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

static int rank, size;

/* 2x2 integer matrices: a non-commutative operation, so order is checked. */
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

static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    /* Datatype queries are allowed inside a reduction function. */
    int sz = 0;
    MPI_Type_size(*dt, &sz);
    CHECK(sz == 8, "the reduction function sees a datatype of %d bytes", sz);
    double *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        double ax = x[i] < 0 ? -x[i] : x[i], ay = y[i] < 0 ? -y[i] : y[i];
        y[i] = ax > ay ? ax : ay;
    }
}

/* Rank r contributes m(r) = [[r+1, 1], [1, 0]]: products of these differ with the order,
 * so a reduction that does not keep rank order gives a different matrix. */
static mat mat_of(int r)
{
    mat m = {r + 1, 1, 1, 0};
    return m;
}

static mat mat_product(int from, int to)
{
    mat p = mat_of(from);
    for (int r = from + 1; r <= to; r++) {
        mat next = mat_of(r);
        int len = 1;
        /* p * next: matmul computes inout = in * inout. */
        matmul(&p, &next, &len, NULL);
        p = next;
    }
    return p;
}

static void basics(void)
{
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int v[5];
    for (int root = 0; root < size; root++) {
        for (int i = 0; i < 5; i++)
            v[i] = rank == root ? root * 10 + i : -1;
        OK(MPI_Bcast(v, 5, MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < 5; i++)
            CHECK(v[i] == root * 10 + i, "bcast from %d: v[%d] = %d", root, i, v[i]);
    }

    long s[3] = {rank, 2 * rank, 1}, r[3] = {0, 0, 0};
    long sum = (long)size * (size - 1) / 2;
    for (int root = 0; root < size; root++) {
        OK(MPI_Reduce(s, r, 3, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD));
        if (rank == root)
            CHECK(r[0] == sum && r[1] == 2 * sum && r[2] == size, "reduce sum %ld", r[0]);
    }
    /* In place at the root. */
    long ip[3] = {rank, 2 * rank, 1};
    if (rank == 0)
        OK(MPI_Reduce(MPI_IN_PLACE, ip, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    else
        OK(MPI_Reduce(ip, NULL, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0)
        CHECK(ip[0] == sum && ip[2] == size, "in-place reduce %ld", ip[0]);

    double d = rank + 0.5, dmax = 0, dmin = 0;
    OK(MPI_Allreduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    OK(MPI_Allreduce(&d, &dmin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    CHECK(dmax == size - 0.5 && dmin == 0.5, "allreduce max %g min %g", dmax, dmin);
    unsigned bits = 1u << rank;
    OK(MPI_Allreduce(MPI_IN_PLACE, &bits, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD));
    CHECK(bits == (1u << size) - 1, "in-place allreduce BOR %x", bits);
    int land = rank != 0, lor = rank == size - 1;
    OK(MPI_Allreduce(MPI_IN_PLACE, &land, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    OK(MPI_Allreduce(MPI_IN_PLACE, &lor, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD));
    CHECK(land == 0 && lor == 1, "LAND %d LOR %d", land, lor);
    float prod = 2.0f;
    OK(MPI_Allreduce(MPI_IN_PLACE, &prod, 1, MPI_FLOAT, MPI_PROD, MPI_COMM_WORLD));
    CHECK(prod == (float)(1 << size), "PROD %g", prod);
    /* Large in-place reductions (several fragments; the input copy is kept scratch, so run
     * them twice with different data: a stale copy would show). */
    enum { BIG = 300000 };
    long *big = malloc(BIG * sizeof(long));
    CHECK(big != NULL, "malloc %d longs", BIG);
    for (int round = 1; round <= 2; round++) {
        for (int i = 0; i < BIG; i++)
            big[i] = (long)round * (rank + 1) + i;
        OK(MPI_Allreduce(MPI_IN_PLACE, big, BIG, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        long tri = (long)size * (size + 1) / 2;
        for (int i = 0; i < BIG; i += 997)
            CHECK(big[i] == round * tri + (long)size * i, "big in-place allreduce [%d] %ld", i,
                  big[i]);
        for (int i = 0; i < BIG; i++)
            big[i] = (long)round * (rank + 1) + i;
        /* Root 0: MPICH 4.0.2 dereferences MPI_IN_PLACE (segmentation fault at address
         * 0xffff...) in an in-place MPI_Reduce of this size at any other root. */
        int broot = 0;
        OK(MPI_Reduce(rank == broot ? MPI_IN_PLACE : big, rank == broot ? big : NULL, BIG,
                      MPI_LONG, MPI_SUM, broot, MPI_COMM_WORLD));
        if (rank == broot)
            for (int i = 0; i < BIG; i += 997)
                CHECK(big[i] == round * tri + (long)size * i, "big in-place reduce [%d] %ld", i,
                      big[i]);
    }
    free(big);

    /* MINLOC/MAXLOC on {double, int}. */
    struct {
        double v;
        int i;
    } in = {(rank % 2 ? -1.0 : 1.0) * rank, rank}, lo, hi;
    OK(MPI_Allreduce(&in, &lo, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
    OK(MPI_Allreduce(&in, &hi, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    int lo_rank = size > 1 ? ((size - 1) % 2 ? size - 1 : size - 2) : 0;
    int hi_rank = (size - 1) % 2 ? (size > 2 ? size - 2 : 0) : size - 1;
    CHECK(lo.i == lo_rank && hi.i == hi_rank, "minloc at %d (%g), maxloc at %d (%g)", lo.i,
          lo.v, hi.i, hi.v);
    struct {
        int v, i;
    } pin = {rank / 2, rank}, pout;
    OK(MPI_Allreduce(&pin, &pout, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
    CHECK(pout.v == (size - 1) / 2 && pout.i == ((size - 1) / 2) * 2,
          "2int maxloc ties go to the lower index: %d at %d", pout.v, pout.i);
}

/* Predefined operations over a spread of the predefined C types, complex numbers too. */
static void typed_reductions(void)
{
    unsigned long ul = 1ul << rank, ulsum = 0;
    OK(MPI_Allreduce(&ul, &ulsum, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(ulsum == (1ul << size) - 1, "unsigned long sum %lu", ulsum);
    int8_t i8 = (int8_t)(-rank), i8min = 0;
    OK(MPI_Allreduce(&i8, &i8min, 1, MPI_INT8_T, MPI_MIN, MPI_COMM_WORLD));
    CHECK(i8min == -(size - 1), "int8 min %d", i8min);
    short sh = (short)(rank * 100), shmax = 0;
    OK(MPI_Allreduce(&sh, &shmax, 1, MPI_SHORT, MPI_MAX, MPI_COMM_WORLD));
    CHECK(shmax == (size - 1) * 100, "short max %d", shmax);
    uint64_t u = 0xff00ull << rank, ux = 0;
    OK(MPI_Allreduce(&u, &ux, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD));
    uint64_t want = 0;
    for (int r = 0; r < size; r++)
        want ^= 0xff00ull << r;
    CHECK(ux == want, "uint64 bxor %llx", (unsigned long long)ux);
    bool b = rank == size - 1, bor = false;
    OK(MPI_Allreduce(&b, &bor, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD));
    CHECK(bor, "bool lor");
    long long ll = rank + 1, llp = 0;
    OK(MPI_Allreduce(&ll, &llp, 1, MPI_LONG_LONG, MPI_PROD, MPI_COMM_WORLD));
    long long fact = 1;
    for (int k = 2; k <= size; k++)
        fact *= k;
    CHECK(llp == fact, "long long prod %lld", llp);

    double complex z = rank + 1.0 * I, zs = 0, zp = 0;
    OK(MPI_Allreduce(&z, &zs, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
    CHECK(creal(zs) == size * (size - 1) / 2.0 && cimag(zs) == size, "complex sum %g%+gi",
          creal(zs), cimag(zs));
    OK(MPI_Allreduce(&z, &zp, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD));
    double complex zw = 1;
    for (int r = 0; r < size; r++)
        zw *= r + 1.0 * I;
    CHECK(cabs(zp - zw) < 1e-9 * (1 + cabs(zw)), "complex product %g%+gi, want %g%+gi",
          creal(zp), cimag(zp), creal(zw), cimag(zw));
    float complex fz[2] = {1.0f + rank * I, 2.0f}, fs[2];
    OK(MPI_Allreduce(fz, fs, 2, MPI_C_FLOAT_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
    CHECK(crealf(fs[0]) == size && cimagf(fs[0]) == size * (size - 1) / 2.0f &&
              crealf(fs[1]) == 2.0f * size,
          "float complex sum");
}

static void rooted(void)
{
    int root = size - 1;
    int mine[2] = {rank, rank * rank};
    int *all = malloc(sizeof(int) * 2 * size);
    for (int i = 0; i < 2 * size; i++)
        all[i] = -1;
    OK(MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int r = 0; r < size; r++)
            CHECK(all[2 * r] == r && all[2 * r + 1] == r * r, "gather block %d", r);
    /* In place at the root: its block is already there. */
    for (int i = 0; i < 2 * size; i++)
        all[i] = rank == root ? (i / 2 == root ? (i % 2 ? root * root : root) : -1) : -1;
    if (rank == root)
        OK(MPI_Gather(MPI_IN_PLACE, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD));
    else
        OK(MPI_Gather(mine, 2, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int r = 0; r < size; r++)
            CHECK(all[2 * r] == r && all[2 * r + 1] == r * r, "in-place gather block %d", r);

    /* Scatter back: rank r gets block r. */
    int got[2] = {-1, -1};
    OK(MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(got[0] == rank && got[1] == rank * rank, "scatter got %d %d", got[0], got[1]);
    if (rank == root)
        OK(MPI_Scatter(all, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, root, MPI_COMM_WORLD));
    else
        OK(MPI_Scatter(NULL, 0, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));

    /* Variable blocks: rank r contributes r + 1 ints, placed in reverse rank order. */
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    int total = 0;
    for (int r = size - 1; r >= 0; r--) {
        counts[r] = r + 1;
        displs[r] = total;
        total += r + 1;
    }
    int *vin = malloc(sizeof(int) * (rank + 1));
    for (int i = 0; i <= rank; i++)
        vin[i] = 1000 * rank + i;
    int *vall = malloc(sizeof(int) * total);
    OK(MPI_Gatherv(vin, rank + 1, MPI_INT, vall, counts, displs, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int r = 0; r < size; r++)
            for (int i = 0; i <= r; i++)
                CHECK(vall[displs[r] + i] == 1000 * r + i, "gatherv rank %d item %d", r, i);
    /* Gatherv in place at the root: its own block is already in the receive buffer. */
    if (rank == 0) {
        for (int i = 0; i < total; i++)
            vall[i] = i >= displs[0] && i < displs[0] + 1 ? 0 : -1;
        OK(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT, vall, counts, displs, MPI_INT, 0,
                       MPI_COMM_WORLD));
        for (int r = 0; r < size; r++)
            for (int i = 0; i <= r; i++)
                CHECK(vall[displs[r] + i] == 1000 * r + i, "in-place gatherv rank %d item %d", r,
                      i);
    } else {
        OK(MPI_Gatherv(vin, rank + 1, MPI_INT, NULL, NULL, NULL, MPI_INT, 0, MPI_COMM_WORLD));
    }
    int *vback = malloc(sizeof(int) * (rank + 1));
    OK(MPI_Scatterv(vall, counts, displs, MPI_INT, vback, rank + 1, MPI_INT, 0,
                    MPI_COMM_WORLD));
    for (int i = 0; i <= rank; i++)
        CHECK(vback[i] == 1000 * rank + i, "scatterv item %d = %d", i, vback[i]);
    /* Scatterv in place at the root: its block stays where it is. */
    for (int i = 0; i <= rank; i++)
        vback[i] = -1;
    if (rank == 0)
        OK(MPI_Scatterv(vall, counts, displs, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, 0,
                        MPI_COMM_WORLD));
    else
        OK(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, vback, rank + 1, MPI_INT, 0,
                        MPI_COMM_WORLD));
    if (rank > 0)
        CHECK(vback[rank] == 1000 * rank + rank, "in-place scatterv item %d", rank);
    else
        CHECK(vall[displs[0]] == 0, "in-place scatterv left the root's block alone");
    for (int i = 0; i < total; i++)
        vall[i] = -1;
    OK(MPI_Allgatherv(vin, rank + 1, MPI_INT, vall, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i <= r; i++)
            CHECK(vall[displs[r] + i] == 1000 * r + i, "allgatherv rank %d item %d", r, i);
    /* In place: own block already in the receive buffer. */
    for (int i = 0; i < total; i++)
        vall[i] = -1;
    for (int i = 0; i <= rank; i++)
        vall[displs[rank] + i] = 1000 * rank + i;
    OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, vall, counts, displs, MPI_INT,
                      MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        CHECK(vall[displs[r] + r] == 1000 * r + r, "in-place allgatherv rank %d", r);

    for (int i = 0; i < 2 * size; i++)
        all[i] = -1;
    OK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        CHECK(all[2 * r + 1] == r * r, "allgather block %d", r);
    for (int i = 0; i < 2 * size; i++)
        all[i] = i / 2 == rank ? mine[i % 2] : -1;
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        CHECK(all[2 * r] == r, "in-place allgather block %d", r);

    /* Mixed layouts of one signature in one allgather, small blocks and blocks of 300 ints:
     * odd ranks send plain ints and receive into pairs three ints apart (a resized type),
     * even ranks send a contiguous derived type and receive plain ints. */
    for (int count = 2; count <= 300; count += 298) {
        int *src = malloc(sizeof(int) * count);
        int *dst = malloc(sizeof(int) * 3 * count * size);
        CHECK(src && dst, "out of memory");
        for (int i = 0; i < count; i++)
            src[i] = 100000 * rank + i;
        for (int i = 0; i < 3 * count * size; i++)
            dst[i] = -1;
        MPI_Datatype block, spaced;
        OK(MPI_Type_contiguous(count, MPI_INT, &block));
        OK(MPI_Type_commit(&block));
        OK(MPI_Type_create_resized(MPI_INT, 0, 3 * (MPI_Aint)sizeof(int), &spaced));
        OK(MPI_Type_commit(&spaced));
        if (rank % 2)
            OK(MPI_Allgather(src, count, MPI_INT, dst, count, spaced, MPI_COMM_WORLD));
        else
            OK(MPI_Allgather(src, 1, block, dst, count, MPI_INT, MPI_COMM_WORLD));
        int stride = rank % 2 ? 3 : 1;
        for (int r = 0; r < size; r++)
            for (int i = 0; i < count; i++)
                CHECK(dst[(r * count + i) * stride] == 100000 * r + i,
                      "mixed-layout allgather of %d: rank %d item %d is %d", count, r, i,
                      dst[(r * count + i) * stride]);
        OK(MPI_Type_free(&block));
        OK(MPI_Type_free(&spaced));
        free(src);
        free(dst);
    }

    free(all);
    free(counts);
    free(displs);
    free(vin);
    free(vall);
    free(vback);
}

/* One gather and one scatter, three layouts: the root receives (and sends) pairs three ints
 * apart (a resized type), even ranks send (and receive) pairs as a derived type, odd ranks
 * plain ints (Kestrel's short path); small blocks (one round of the node segment) and blocks
 * of 60 ints (messages). */
static void rooted_mixed(void)
{
    MPI_Datatype pair, spaced, big, bigspaced;
    OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    OK(MPI_Type_create_resized(pair, 0, 3 * sizeof(int), &spaced));
    OK(MPI_Type_contiguous(60, MPI_INT, &big));
    OK(MPI_Type_create_resized(big, 0, 61 * sizeof(int), &bigspaced));
    OK(MPI_Type_commit(&pair));
    OK(MPI_Type_commit(&spaced));
    OK(MPI_Type_commit(&big));
    OK(MPI_Type_commit(&bigspaced));
    for (int k = 0; k < 2; k++) {
        int w = k ? 60 : 2, root = k ? 0 : size - 1;
        MPI_Datatype whole = k ? big : pair, apart = k ? bigspaced : spaced;
        int *mine = malloc(sizeof(int) * w), *all = malloc(sizeof(int) * (w + 1) * size);
        for (int i = 0; i < w; i++)
            mine[i] = rank * 1000 + i;
        for (int i = 0; i < (w + 1) * size; i++)
            all[i] = -7;
        if (rank == root)
            OK(MPI_Gather(mine, 1, whole, all, 1, apart, root, MPI_COMM_WORLD));
        else if (rank % 2 == 0)
            OK(MPI_Gather(mine, 1, whole, NULL, 0, MPI_INT, root, MPI_COMM_WORLD));
        else
            OK(MPI_Gather(mine, w, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i <= w; i++)
                    CHECK(all[(w + 1) * r + i] == (i < w ? r * 1000 + i : -7),
                          "mixed-layout gather of %d ints: rank %d item %d = %d", w, r, i,
                          all[(w + 1) * r + i]);
        /* Scatter it back, each block negated first. */
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < w; i++)
                    all[(w + 1) * r + i] = -all[(w + 1) * r + i];
        for (int i = 0; i < w; i++)
            mine[i] = 5;
        if (rank == root)
            OK(MPI_Scatter(all, 1, apart, mine, 1, whole, root, MPI_COMM_WORLD));
        else if (rank % 2 == 0)
            OK(MPI_Scatter(NULL, 0, MPI_INT, mine, 1, whole, root, MPI_COMM_WORLD));
        else
            OK(MPI_Scatter(NULL, 0, MPI_INT, mine, w, MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < w; i++)
            CHECK(mine[i] == -(rank * 1000 + i), "mixed-layout scatter of %d ints: item %d = %d",
                  w, i, mine[i]);
        free(mine);
        free(all);
    }
    OK(MPI_Type_free(&pair));
    OK(MPI_Type_free(&spaced));
    OK(MPI_Type_free(&big));
    OK(MPI_Type_free(&bigspaced));
}

static void alltoall(void)
{
    int *s = malloc(sizeof(int) * size * 2), *r = malloc(sizeof(int) * size * 2);
    for (int p = 0; p < size; p++) {
        s[2 * p] = rank * 100 + p;
        s[2 * p + 1] = -rank;
    }
    OK(MPI_Alltoall(s, 2, MPI_INT, r, 2, MPI_INT, MPI_COMM_WORLD));
    for (int p = 0; p < size; p++)
        CHECK(r[2 * p] == p * 100 + rank && r[2 * p + 1] == -p, "alltoall from %d", p);
    OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, 2, MPI_INT, MPI_COMM_WORLD));
    for (int p = 0; p < size; p++)
        CHECK(s[2 * p] == p * 100 + rank, "in-place alltoall from %d", p);
    /* One alltoall, two layouts: even ranks send pairs as a derived type and receive them
     * three ints apart (a resized type), odd ranks use plain ints (Kestrel's short path). */
    MPI_Datatype pair, spaced;
    OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    OK(MPI_Type_create_resized(pair, 0, 3 * sizeof(int), &spaced));
    OK(MPI_Type_commit(&pair));
    OK(MPI_Type_commit(&spaced));
    int *w = malloc(sizeof(int) * size * 3);
    for (int p = 0; p < size; p++) {
        s[2 * p] = rank * 1000 + p;
        s[2 * p + 1] = rank - p;
        w[3 * p] = w[3 * p + 1] = w[3 * p + 2] = -7;
    }
    if (rank % 2 == 0) {
        OK(MPI_Alltoall(s, 1, pair, w, 1, spaced, MPI_COMM_WORLD));
        for (int p = 0; p < size; p++)
            CHECK(w[3 * p] == p * 1000 + rank && w[3 * p + 1] == p - rank && w[3 * p + 2] == -7,
                  "mixed-layout alltoall from %d", p);
    } else {
        OK(MPI_Alltoall(s, 2, MPI_INT, r, 2, MPI_INT, MPI_COMM_WORLD));
        for (int p = 0; p < size; p++)
            CHECK(r[2 * p] == p * 1000 + rank && r[2 * p + 1] == p - rank,
                  "mixed-layout alltoall from %d", p);
    }
    free(w);
    OK(MPI_Type_free(&pair));
    OK(MPI_Type_free(&spaced));

    /* alltoallv: rank r sends p + 1 ints to rank p. */
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
    int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
    int st = 0, rt = 0;
    for (int p = 0; p < size; p++) {
        sc[p] = p + 1;
        sd[p] = st;
        st += p + 1;
        rc[p] = rank + 1;
        rd[p] = rt;
        rt += rank + 1;
    }
    int *sv = malloc(sizeof(int) * st), *rv = malloc(sizeof(int) * rt);
    for (int p = 0; p < size; p++)
        for (int i = 0; i <= p; i++)
            sv[sd[p] + i] = rank * 1000 + p * 10 + i;
    OK(MPI_Alltoallv(sv, sc, sd, MPI_INT, rv, rc, rd, MPI_INT, MPI_COMM_WORLD));
    for (int p = 0; p < size; p++)
        for (int i = 0; i <= rank; i++)
            CHECK(rv[rd[p] + i] == p * 1000 + rank * 10 + i, "alltoallv from %d item %d", p,
                  i);
    /* Alltoallv in place: blocks of 2 ints, 3 ints apart (the third of each is untouched). */
    int *iv = malloc(sizeof(int) * 3 * size), *ic = malloc(sizeof(int) * size),
        *id = malloc(sizeof(int) * size);
    for (int p = 0; p < size; p++) {
        ic[p] = 2;
        id[p] = 3 * p;
        iv[3 * p] = rank * 100 + p;
        iv[3 * p + 1] = -rank;
        iv[3 * p + 2] = 7;
    }
    OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, iv, ic, id, MPI_INT,
                     MPI_COMM_WORLD));
    for (int p = 0; p < size; p++)
        CHECK(iv[3 * p] == p * 100 + rank && iv[3 * p + 1] == -p && iv[3 * p + 2] == 7,
              "in-place alltoallv block from %d: %d %d %d", p, iv[3 * p], iv[3 * p + 1],
              iv[3 * p + 2]);
    free(iv);
    free(ic);
    free(id);
    free(s);
    free(r);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(sv);
    free(rv);
}

static void reductions(void)
{
    /* reduce_scatter_block: element i of every rank is rank + i; rank r gets 2 elements. */
    int *in = malloc(sizeof(int) * 2 * size), out[2];
    for (int i = 0; i < 2 * size; i++)
        in[i] = rank + i;
    OK(MPI_Reduce_scatter_block(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    int base = size * (size - 1) / 2;
    CHECK(out[0] == base + size * 2 * rank && out[1] == base + size * (2 * rank + 1),
          "reduce_scatter_block got %d %d", out[0], out[1]);
    OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, in, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(in[0] == base + size * 2 * rank, "in-place reduce_scatter_block %d", in[0]);

    /* reduce_scatter with counts r + 1. */
    int *counts = malloc(sizeof(int) * size), total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r + 1;
        total += r + 1;
    }
    int *vin = malloc(sizeof(int) * total), *vout = malloc(sizeof(int) * (rank + 1));
    for (int i = 0; i < total; i++)
        vin[i] = i;
    OK(MPI_Reduce_scatter(vin, vout, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    int first = rank * (rank + 1) / 2;
    for (int i = 0; i <= rank; i++)
        CHECK(vout[i] == size * (first + i), "reduce_scatter item %d = %d", i, vout[i]);

    for (int i = 0; i < total; i++)
        vin[i] = i;
    OK(MPI_Reduce_scatter(MPI_IN_PLACE, vin, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i <= rank; i++)
        CHECK(vin[i] == size * (first + i), "in-place reduce_scatter item %d = %d", i, vin[i]);

    /* scan and exscan. */
    int x = rank + 1, inc = 0, exc = -7;
    OK(MPI_Scan(&x, &inc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(inc == (rank + 1) * (rank + 2) / 2, "scan %d", inc);
    OK(MPI_Exscan(&x, &exc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank > 0)
        CHECK(exc == rank * (rank + 1) / 2, "exscan %d", exc);
    int ex = rank + 1;
    OK(MPI_Exscan(MPI_IN_PLACE, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank > 0)
        CHECK(ex == rank * (rank + 1) / 2, "in-place exscan %d", ex);
    int y = rank + 1;
    OK(MPI_Scan(MPI_IN_PLACE, &y, 1, MPI_INT, MPI_PROD, MPI_COMM_WORLD));
    int fact = 1;
    for (int k = 2; k <= rank + 1; k++)
        fact *= k;
    CHECK(y == fact, "in-place scan prod %d", y);

    /* User operations. */
    MPI_Datatype mt;
    OK(MPI_Type_contiguous(4, MPI_INT, &mt));
    OK(MPI_Type_commit(&mt));
    MPI_Op mop, aop;
    OK(MPI_Op_create(matmul, 0, &mop));
    OK(MPI_Op_create(absmax, 1, &aop));
    int commute = -1;
    OK(MPI_Op_commutative(mop, &commute));
    CHECK(commute == 0, "matmul is not commutative");
    OK(MPI_Op_commutative(MPI_SUM, &commute));
    CHECK(commute == 1, "MPI_SUM is commutative");
    mat m = mat_of(rank), res = {0, 0, 0, 0};
    mat want = mat_product(0, size - 1);
    OK(MPI_Reduce(&m, &res, 1, mt, mop, 0, MPI_COMM_WORLD));
    if (rank == 0)
        CHECK(res.a == want.a && res.b == want.b && res.c == want.c && res.d == want.d,
              "non-commutative reduce gave [%d %d %d %d], rank order gives [%d %d %d %d]",
              res.a, res.b, res.c, res.d, want.a, want.b, want.c, want.d);
    OK(MPI_Allreduce(&m, &res, 1, mt, mop, MPI_COMM_WORLD));
    CHECK(res.a == want.a && res.d == want.d, "non-commutative allreduce");
    mat sc = {0, 0, 0, 0};
    OK(MPI_Scan(&m, &sc, 1, mt, mop, MPI_COMM_WORLD));
    mat wsc = mat_product(0, rank);
    CHECK(sc.a == wsc.a && sc.b == wsc.b, "non-commutative scan");
    double dv[3] = {-(double)rank, rank * 0.5, 1.0}, dr[3];
    OK(MPI_Allreduce(dv, dr, 3, MPI_DOUBLE, aop, MPI_COMM_WORLD));
    CHECK(dr[0] == size - 1 && dr[1] == (size - 1) * 0.5 && dr[2] == 1.0, "user absmax");
    double loc[2] = {-5.0, 2.0};
    OK(MPI_Reduce_local(dv, loc, 2, MPI_DOUBLE, aop));
    CHECK(loc[0] == (rank > 5 ? rank : 5.0), "reduce_local %g", loc[0]);
    int li[2] = {1, 2}, lo[2] = {10, 20};
    OK(MPI_Reduce_local(li, lo, 2, MPI_INT, MPI_SUM));
    CHECK(lo[0] == 11 && lo[1] == 22, "reduce_local sum");
    OK(MPI_Op_free(&mop));
    OK(MPI_Op_free(&aop));
    CHECK(mop == MPI_OP_NULL, "Op_free clears the handle");
    OK(MPI_Type_free(&mt));
    free(in);
    free(counts);
    free(vin);
    free(vout);
}

/* Sums columns of a 4x4 double matrix: the function sees the vector type's layout (one
 * element of `col` = 4 doubles, 4 apart, extent 13 doubles). */
static void colsum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    double *x = in, *y = inout;
    for (int k = 0; k < *len; k++)
        for (int i = 0; i < 4; i++)
            y[13 * k + 4 * i] += x[13 * k + 4 * i];
}

/* A strided column of a 4x4 matrix in bcast, gather and a user reduction. */
static void derived(void)
{
    double a[4][4];
    MPI_Datatype col;
    OK(MPI_Type_vector(4, 1, 4, MPI_DOUBLE, &col));
    OK(MPI_Type_commit(&col));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            a[i][j] = rank == 0 ? i * 4 + j : -1;
    OK(MPI_Bcast(&a[0][1], 1, col, 0, MPI_COMM_WORLD));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            CHECK(a[i][j] == (j == 1 || rank == 0 ? i * 4 + j : -1), "bcast column a[%d][%d]=%g",
                  i, j, a[i][j]);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            a[i][j] = rank + i;
    double out[4][4] = {{0}};
    MPI_Op op;
    OK(MPI_Op_create(colsum, 1, &op));
    OK(MPI_Allreduce(&a[0][2], &out[0][2], 1, col, op, MPI_COMM_WORLD));
    OK(MPI_Op_free(&op));
    for (int i = 0; i < 4; i++)
        CHECK(out[i][2] == size * i + size * (size - 1) / 2 && out[i][1] == 0,
              "column allreduce row %d: %g", i, out[i][2]);
    /* Gather one column from every rank into contiguous rows at the root. */
    double *rows = malloc(sizeof(double) * 4 * size);
    OK(MPI_Gather(&a[0][3], 1, col, rows, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < 4; i++)
                CHECK(rows[4 * r + i] == r + i, "gathered column of rank %d row %d", r, i);
    free(rows);
    OK(MPI_Type_free(&col));
}

static void subcommunicator(void)
{
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
    int hr, hs;
    OK(MPI_Comm_rank(half, &hr));
    OK(MPI_Comm_size(half, &hs));
    int sum = 0, one = rank;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, half));
    int want = 0;
    for (int r = rank % 2; r < size; r += 2)
        want += r;
    CHECK(sum == want, "allreduce on the split communicator %d, want %d", sum, want);
    int top = rank;
    OK(MPI_Bcast(&top, 1, MPI_INT, 0, half));
    /* Keys are -rank: rank 0 of the half is its highest world rank. */
    int hi = rank % 2;
    while (hi + 2 < size)
        hi += 2;
    CHECK(top == hi, "bcast on the split communicator from %d", top);
    OK(MPI_Comm_free(&half));
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rank = check_rank;
    basics();
    typed_reductions();
    rooted();
    rooted_mixed();
    alltoall();
    reductions();
    derived();
    subcommunicator();
    test_pass("coll");
    return 0;
}
