/*
 * One-sided communication over the cross product of function, op, type, synchronization
 * mode and window flavor, checked against a serial model computed here. Flavors (one
 * window each, displacement unit 1): MPI_Win_create on malloc'd memory, MPI_Win_allocate,
 * MPI_Win_allocate_shared on the MPI_COMM_TYPE_SHARED split (only when that split is the
 * whole world; otherwise skipped, and rank 0 prints a line saying so), and
 * MPI_Win_create_dynamic + MPI_Win_attach (addresses exchanged with MPI_Allgather of
 * MPI_AINT). On every flavor one epoch of each synchronization mode: MPI_Win_fence;
 * post/start/complete/wait, every rank exposing to and accessing every rank; MPI_Win_lock
 * shared (all targets locked at once); MPI_Win_lock exclusive (one target at a time);
 * MPI_Win_lock_all + MPI_Win_flush per target, after which a get must see this origin's
 * elements final; MPI_Win_lock_all + MPI_Win_flush_local per target, then unlock_all.
 * Origin buffers are overwritten as soon as they may be reused (after the flush,
 * flush_local, unlock, closing fence or complete), so a late read of them shows.
 * Functions: MPI_Put, MPI_Get, MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op,
 * MPI_Compare_and_swap, and in the passive modes only MPI_Rput, MPI_Rget, MPI_Raccumulate,
 * MPI_Rget_accumulate (completed by MPI_Waitall, MPI_Wait, an MPI_Testall loop). Ops per
 * type group as in MPI-3.1 5.9.2: SUM, PROD on C integer, multi-language, floating and
 * complex types; MAX, MIN on integer, multi-language and floating; BAND, BOR, BXOR on
 * integer, multi-language and MPI_BYTE; LAND, LOR, LXOR on integer and MPI_C_BOOL;
 * MAXLOC, MINLOC on the pair types; REPLACE on all; NO_OP on all (get_accumulate and
 * fetch_and_op only). Types (37): the 18 C integer types (MPI_SIGNED_CHAR ..
 * MPI_UNSIGNED_LONG_LONG, MPI_INT8_T .. MPI_UINT64_T), MPI_AINT, MPI_OFFSET, MPI_COUNT,
 * MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_C_BOOL, MPI_BYTE, MPI_C_FLOAT_COMPLEX,
 * MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX, MPI_2INT, MPI_FLOAT_INT,
 * MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT, and MPI_CHAR,
 * MPI_WCHAR (in no group: REPLACE and NO_OP); put and get on every type; compare-and-swap
 * on the integer, multi-language, MPI_C_BOOL and MPI_BYTE types. Derived datatypes on
 * both sides (origin MPI_Type_vector, target MPI_Type_indexed) on MPI_INT and MPI_DOUBLE
 * for put, get, accumulate and get_accumulate (SUM) and their request-based forms.
 * Every (function, type, op) has its own segment of every window: all origins apply it
 * to one shared element (the result is the serial fold of commutative ops, one of the
 * origins' values for REPLACE; for compare-and-swap exactly one origin swaps and all
 * others fetch its value) and each origin to its own two elements (one call of count 2;
 * the single-element atomics one at a time, compare-and-swap once succeeding and once
 * failing). Values are small integers, so SUM and PROD are exact in every type and in
 * any order. Fetched values must be exact where they are determined (own elements, gets,
 * NO_OP); on the shared element they must be the initial value with the op of some
 * subset of the other origins applied (any value with more than 9 ranks).
 * To keep oversubscribed runs short (MPICH 4.0.2 takes ~30 us an operation with 6 ranks
 * on 2 cores), each cell runs every (type, op) with one of the accumulate functions, in
 * turn over the cells, so that every (type, op, sync mode, flavor) is covered and each
 * function meets each (type, op) in several cells; and with more than 4 ranks each
 * combination goes to 3 of the targets (all origins to the same 3, in turn). The argument
 * -full runs every function everywhere; -only, -skip, -flavor, -sync (see add_combo)
 * narrow a run down to one failure; -v prints each cell's time. Any number of ranks (1-6
 * tested). Nothing is skipped on MPICH. Not covered: Fortran and C++ predefined types.
 */
#define _DEFAULT_SOURCE /* usleep */
#include "check.h"
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>
#include <wchar.h>

static int rank, size, verbose;

/* ---------------------------------------------------------------- operations */

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_BAND, O_BOR, O_BXOR, O_LAND, O_LOR, O_LXOR,
       O_REPLACE, O_NO_OP, O_MAXLOC, O_MINLOC, NOPS };

static struct {
    MPI_Op op;
    const char *name;
} ops[NOPS];

static void ops_init(void)
{
#define OP(i, o) ops[i].op = o, ops[i].name = #o
    OP(O_SUM, MPI_SUM), OP(O_PROD, MPI_PROD), OP(O_MAX, MPI_MAX), OP(O_MIN, MPI_MIN);
    OP(O_BAND, MPI_BAND), OP(O_BOR, MPI_BOR), OP(O_BXOR, MPI_BXOR), OP(O_LAND, MPI_LAND);
    OP(O_LOR, MPI_LOR), OP(O_LXOR, MPI_LXOR), OP(O_REPLACE, MPI_REPLACE);
    OP(O_NO_OP, MPI_NO_OP), OP(O_MAXLOC, MPI_MAXLOC), OP(O_MINLOC, MPI_MINLOC);
#undef OP
}

/* ---------------------------------------------------------------- types */

/* Type groups of MPI-3.1 section 5.9.2 (plus "char": MPI_CHAR and MPI_WCHAR, which belong
 * to no group and take only MPI_REPLACE and MPI_NO_OP). */
enum { G_INT, G_ML, G_FLOAT, G_BOOL, G_BYTE, G_COMPLEX, G_PAIR, G_CHAR };

/* Element values are built from two integers: a (the value, the real part, the pair's
 * value) and b (the imaginary part, the pair's index). Per C type: set, eq (by value: the
 * padding of long double is not compared), show, and apply (an op on a model element). */
#define SET_EQ(N, T)                                                                      \
    typedef T N##_t;                                                                      \
    static void N##_set(void *p, int64_t a, int64_t b) { (void)b, *(T *)p = (T)a; }       \
    static int N##_eq(const void *x, const void *y) { return *(const T *)x == *(const T *)y; }
#define SHOW(N, T, FMT, CAST)                                                             \
    static void N##_show(const void *p, char *s) { snprintf(s, 96, FMT, (CAST)*(const T *)p); }
#define APPLY(N, T, CASES)                                                                \
    static void N##_apply(int op, void *px, const void *py)                               \
    {                                                                                     \
        T *x = px, y = *(const T *)py;                                                    \
        switch (op) {                                                                     \
        CASES case O_REPLACE: *x = y; break;                                              \
        default: break;                                                                   \
        }                                                                                 \
    }
#define ARITH(T) case O_SUM: *x = (T)(*x + y); break; case O_PROD: *x = (T)(*x * y); break;
#define ORDER case O_MAX: *x = *x > y ? *x : y; break; case O_MIN: *x = *x < y ? *x : y; break;
#define BITS(T)                                                                           \
    case O_BAND: *x = (T)(*x & y); break;                                                 \
    case O_BOR: *x = (T)(*x | y); break;                                                  \
    case O_BXOR: *x = (T)(*x ^ y); break;
#define LOGIC(T)                                                                          \
    case O_LAND: *x = (T)(*x && y); break;                                                \
    case O_LOR: *x = (T)(*x || y); break;                                                 \
    case O_LXOR: *x = (T)(!*x != !y); break;
#define INTEGER(N, T)                                                                     \
    SET_EQ(N, T) SHOW(N, T, "%lld", long long) APPLY(N, T, ARITH(T) ORDER BITS(T) LOGIC(T))
#define FLOATING(N, T) SET_EQ(N, T) SHOW(N, T, "%Lg", long double) APPLY(N, T, ARITH(T) ORDER)
#define BOOLEAN(N, T) SET_EQ(N, T) SHOW(N, T, "%d", int) APPLY(N, T, LOGIC(T))
#define COMPLEX(N, T)                                                                     \
    typedef T N##_t;                                                                      \
    static void N##_set(void *p, int64_t a, int64_t b) { *(T *)p = (T)(a + b * I); }      \
    static int N##_eq(const void *x, const void *y) { return *(const T *)x == *(const T *)y; } \
    static void N##_show(const void *p, char *s)                                          \
    {                                                                                     \
        long double _Complex v = *(const T *)p;                                           \
        snprintf(s, 96, "(%Lg,%Lg)", creall(v), cimagl(v));                               \
    }                                                                                     \
    APPLY(N, T, ARITH(T))
/* A pair type: value and int index; MAXLOC/MINLOC keep the lower index on ties. */
#define PAIR(N, V)                                                                        \
    typedef struct {                                                                      \
        V v;                                                                              \
        int i;                                                                            \
    } N##_t;                                                                              \
    static void N##_set(void *p, int64_t a, int64_t b)                                    \
    {                                                                                     \
        *(N##_t *)p = (N##_t){(V)a, (int)b};                                              \
    }                                                                                     \
    static int N##_eq(const void *x, const void *y)                                       \
    {                                                                                     \
        const N##_t *a = x, *b = y;                                                       \
        return a->v == b->v && a->i == b->i;                                              \
    }                                                                                     \
    static void N##_show(const void *p, char *s)                                          \
    {                                                                                     \
        const N##_t *a = p;                                                               \
        snprintf(s, 96, "(%Lg,%d)", (long double)a->v, a->i);                             \
    }                                                                                     \
    static void N##_apply(int op, void *px, const void *py)                               \
    {                                                                                     \
        N##_t *x = px;                                                                    \
        const N##_t *y = py;                                                              \
        int loc = op == O_MAXLOC || op == O_MINLOC;                                       \
        if (op == O_REPLACE || (op == O_MAXLOC && y->v > x->v) ||                         \
            (op == O_MINLOC && y->v < x->v))                                              \
            *x = *y;                                                                      \
        else if (loc && y->v == x->v && y->i < x->i)                                      \
            x->i = y->i;                                                                  \
    }

/* The predefined types: handle, name for the C functions, C type, kind, group, whether
 * values may be negative. */
#define TYPES(X)                                                                          \
    X(MPI_SIGNED_CHAR, schar, signed char, INTEGER, G_INT, 1)                             \
    X(MPI_UNSIGNED_CHAR, uchar, unsigned char, INTEGER, G_INT, 0)                         \
    X(MPI_SHORT, short_, short, INTEGER, G_INT, 1)                                        \
    X(MPI_UNSIGNED_SHORT, ushort, unsigned short, INTEGER, G_INT, 0)                      \
    X(MPI_INT, int_, int, INTEGER, G_INT, 1)                                              \
    X(MPI_UNSIGNED, uint, unsigned, INTEGER, G_INT, 0)                                    \
    X(MPI_LONG, long_, long, INTEGER, G_INT, 1)                                           \
    X(MPI_UNSIGNED_LONG, ulong, unsigned long, INTEGER, G_INT, 0)                         \
    X(MPI_LONG_LONG, llong, long long, INTEGER, G_INT, 1)                                 \
    X(MPI_UNSIGNED_LONG_LONG, ullong, unsigned long long, INTEGER, G_INT, 0)              \
    X(MPI_INT8_T, i8, int8_t, INTEGER, G_INT, 1)                                          \
    X(MPI_UINT8_T, u8, uint8_t, INTEGER, G_INT, 0)                                        \
    X(MPI_INT16_T, i16, int16_t, INTEGER, G_INT, 1)                                       \
    X(MPI_UINT16_T, u16, uint16_t, INTEGER, G_INT, 0)                                     \
    X(MPI_INT32_T, i32, int32_t, INTEGER, G_INT, 1)                                       \
    X(MPI_UINT32_T, u32, uint32_t, INTEGER, G_INT, 0)                                     \
    X(MPI_INT64_T, i64, int64_t, INTEGER, G_INT, 1)                                       \
    X(MPI_UINT64_T, u64, uint64_t, INTEGER, G_INT, 0)                                     \
    X(MPI_AINT, aint, MPI_Aint, INTEGER, G_ML, 1)                                         \
    X(MPI_OFFSET, offset, MPI_Offset, INTEGER, G_ML, 1)                                   \
    X(MPI_COUNT, count, MPI_Count, INTEGER, G_ML, 1)                                      \
    X(MPI_FLOAT, float_, float, FLOATING, G_FLOAT, 1)                                     \
    X(MPI_DOUBLE, double_, double, FLOATING, G_FLOAT, 1)                                  \
    X(MPI_LONG_DOUBLE, ldouble, long double, FLOATING, G_FLOAT, 1)                        \
    X(MPI_C_BOOL, bool_, bool, BOOLEAN, G_BOOL, 0)                                        \
    X(MPI_BYTE, byte, unsigned char, INTEGER, G_BYTE, 0)                                  \
    X(MPI_C_FLOAT_COMPLEX, fcomplex, float _Complex, COMPLEX, G_COMPLEX, 1)               \
    X(MPI_C_DOUBLE_COMPLEX, dcomplex, double _Complex, COMPLEX, G_COMPLEX, 1)             \
    X(MPI_C_LONG_DOUBLE_COMPLEX, ldcomplex, long double _Complex, COMPLEX, G_COMPLEX, 1)  \
    X(MPI_2INT, twoint, int, PAIR, G_PAIR, 1)                                             \
    X(MPI_FLOAT_INT, floatint, float, PAIR, G_PAIR, 1)                                    \
    X(MPI_DOUBLE_INT, doubleint, double, PAIR, G_PAIR, 1)                                 \
    X(MPI_LONG_INT, longint, long, PAIR, G_PAIR, 1)                                       \
    X(MPI_SHORT_INT, shortint, short, PAIR, G_PAIR, 1)                                    \
    X(MPI_LONG_DOUBLE_INT, ldoubleint, long double, PAIR, G_PAIR, 1)                      \
    X(MPI_CHAR, char_, char, INTEGER, G_CHAR, 0)                                          \
    X(MPI_WCHAR, wchar, wchar_t, INTEGER, G_CHAR, 0)
#define DEFINE(dt, N, C, KIND, g, s) KIND(N, C)
TYPES(DEFINE)

typedef struct {
    MPI_Datatype dt;
    const char *name;
    int size;    /* sizeof the C type: the MPI extent */
    int group;
    int sgn;     /* signed values allowed */
    int derived; /* also used in derived datatypes on both sides */
    void (*set)(void *, int64_t, int64_t);
    int (*eq)(const void *, const void *);
    void (*show)(const void *, char *);
    void (*apply)(int, void *, const void *);
} type_t;

enum { NTYPES = 40 };
static type_t types[NTYPES];
static int ntypes;

static void add_type(type_t t)
{
    CHECK(ntypes < NTYPES, "too many types");
    t.derived = t.dt == MPI_INT || t.dt == MPI_DOUBLE;
    types[ntypes++] = t;
    MPI_Datatype dt = t.dt;
    const char *name = t.name;
    int sz = t.size;
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(dt, &lb, &ext));
    CHECK(lb == 0 && ext == sz, "%s: extent %ld (lb %ld), sizeof %d", name, (long)ext, (long)lb,
          sz);
}

static void types_init(void)
{
#define REGISTER(dt, N, C, KIND, g, s)                                                   \
    add_type((type_t){dt, #dt, sizeof(N##_t), g, s, 0, N##_set, N##_eq, N##_show, N##_apply});
    TYPES(REGISTER)
}

/* Which op applies to which group (MPI-3.1 section 5.9.2; MPI_REPLACE and MPI_NO_OP apply
 * to every predefined type, section 11.3.4). */
static int applies(int group, int op)
{
#define G(g) (1u << (g))
    static const unsigned groups[NOPS] = {
        [O_SUM] = G(G_INT) | G(G_ML) | G(G_FLOAT) | G(G_COMPLEX),
        [O_PROD] = G(G_INT) | G(G_ML) | G(G_FLOAT) | G(G_COMPLEX),
        [O_MAX] = G(G_INT) | G(G_ML) | G(G_FLOAT),
        [O_MIN] = G(G_INT) | G(G_ML) | G(G_FLOAT),
        [O_BAND] = G(G_INT) | G(G_ML) | G(G_BYTE),
        [O_BOR] = G(G_INT) | G(G_ML) | G(G_BYTE),
        [O_BXOR] = G(G_INT) | G(G_ML) | G(G_BYTE),
        [O_LAND] = G(G_INT) | G(G_BOOL),
        [O_LOR] = G(G_INT) | G(G_BOOL),
        [O_LXOR] = G(G_INT) | G(G_BOOL),
        [O_REPLACE] = ~0u,
        [O_NO_OP] = ~0u,
        [O_MAXLOC] = G(G_PAIR),
        [O_MINLOC] = G(G_PAIR),
    };
#undef G
    return (groups[op] >> group) & 1;
}

/* MPI_Compare_and_swap: C integer, logical, multi-language types and byte (MPI-3.1 11.3.4). */
static int cas_applies(int group)
{
    return group == G_INT || group == G_ML || group == G_BOOL || group == G_BYTE;
}

/* ---------------------------------------------------------------- combinations */

enum { K_PUT, K_GET, K_ACC, K_GACC, K_FOP, K_CAS, K_RPUT, K_RGET, K_RACC, K_RGACC, NKINDS };
static const char *kind_names[NKINDS] = {
    "MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Get_accumulate", "MPI_Fetch_and_op",
    "MPI_Compare_and_swap", "MPI_Rput", "MPI_Rget", "MPI_Raccumulate", "MPI_Rget_accumulate"};

enum { S_FENCE, S_PSCW, S_LOCK_SHARED, S_LOCK_EXCL, S_FLUSH, S_FLUSH_LOCAL, NSYNCS };
static const char *sync_names[NSYNCS] = {
    "fence", "post/start/complete/wait", "lock shared", "lock exclusive",
    "lock_all + flush", "lock_all + flush_local"};

enum { F_CREATE, F_ALLOCATE, F_SHARED, F_DYNAMIC, NFLAVORS };
static const char *flavor_names[NFLAVORS] = {
    "MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared", "MPI_Win_create_dynamic"};

/* One function on one type with one op: every origin applies it to a target in its own
 * segment of the window. Plain (predefined datatypes on both sides): element 0 is shared
 * by all origins, elements 1 + 2o and 2 + 2o belong to origin o. Derived (origin
 * MPI_Type_vector(2, 2, 3), target MPI_Type_indexed({1, 2, 1} at {0, 2, 5})): origin o
 * owns elements 6o..6o+5, the 6 elements from 6n are shared. */
typedef struct {
    int kind, ti, op, derived, idx;
    int ext, nel;       /* element extent, elements in the segment */
    MPI_Aint seg;       /* segment offset in the window, bytes */
    size_t obase;       /* offset of this combination's origin slots (SLOTS per target) */
} combo_t;

enum { SLOTS = 10, MAXEXT = 32 };
typedef union {
    long double ld[MAXEXT / sizeof(long double)];
    unsigned char b[MAXEXT];
} elem_t;

static combo_t *combos;
static int ncombos;
static MPI_Aint win_bytes;
static size_t slot_bytes;
static MPI_Datatype ovec[NTYPES], tind[NTYPES];

static int is_req(int kind)
{
    return kind >= K_RPUT;
}
static int base_kind(int kind)
{
    return kind == K_RPUT ? K_PUT : kind == K_RGET ? K_GET : kind == K_RACC ? K_ACC
                                                    : kind == K_RGACC ? K_GACC : kind;
}
static int fetches(int kind)
{
    int k = base_kind(kind);
    return k == K_GET || k == K_GACC || k == K_FOP || k == K_CAS;
}
static int flavor_now, sync_now, full;

/* Whether combination c runs in the current cell. Request-based operations only in
 * passive-target epochs (MPI-3.1 11.3.5). Each (type, op) runs in every cell with one of the
 * accumulate functions (MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op, and in passive
 * epochs MPI_Raccumulate, MPI_Rget_accumulate; MPI_NO_OP without the two that cannot take
 * it), chosen in turn by type, op, flavor and sync mode; with -full all of them. Put, get,
 * compare-and-swap and the derived datatypes run in every cell. */
static int issued(const combo_t *c)
{
    static const int fam[2][2][5] = {{{K_ACC, K_GACC, K_FOP}, {K_GACC, K_FOP}},
                                     {{K_ACC, K_GACC, K_FOP, K_RACC, K_RGACC},
                                      {K_GACC, K_FOP, K_RGACC}}};
    static const int nfam[2][2] = {{3, 2}, {5, 3}};
    int passive = sync_now >= S_LOCK_SHARED, k = c->kind, noop = c->op == O_NO_OP;
    if (is_req(k) && !passive)
        return 0;
    if (full || c->derived || base_kind(k) == K_PUT || base_kind(k) == K_GET || k == K_CAS)
        return 1;
    int n = nfam[passive][noop];
    return k == fam[passive][noop][(c->ti + c->op + flavor_now + sync_now) % n];
}

/* Whether the origins apply combination c to target t: with up to 4 ranks every origin to
 * every target; with more (to keep oversubscribed runs short) every origin to 3 targets,
 * the same 3 for all origins, in turn over the combinations, so that each origin still
 * reaches every target in every epoch. With -full every target. */
static int hits(const combo_t *c, int t)
{
    return full || size <= 4 || (t - c->idx % size + size) % size < 3;
}

/* Command-line filters (for reproducing one failure): -only S / -skip S keep or drop the
 * combinations whose label "<function> <type> <op>" contains S (repeatable), -flavor S and
 * -sync S run only the cells whose names contain S; -full runs every accumulate function
 * with every (type, op) in every cell; -v prints each cell's time. */
static const char *only[16], *skip[16], *flavor_only, *sync_only;
static int nonly, nskip;

static void add_combo(int kind, int ti, int op, int derived)
{
    static int cap;
    char label[160];
    int keep = nonly == 0;
    snprintf(label, sizeof label, "%s%s %s %s", kind_names[kind], derived ? "(derived)" : "",
             types[ti].name, ops[op].name);
    for (int i = 0; i < nonly; i++)
        keep |= strstr(label, only[i]) != NULL;
    for (int i = 0; i < nskip; i++)
        keep &= strstr(label, skip[i]) == NULL;
    if (!keep)
        return;
    if (ncombos == cap) {
        cap = cap ? 2 * cap : 256;
        combos = realloc(combos, cap * sizeof(combo_t));
        CHECK(combos != NULL, "realloc");
    }
    combo_t *c = &combos[ncombos++];
    c->kind = kind, c->ti = ti, c->op = op, c->derived = derived, c->idx = ncombos - 1;
    c->ext = types[ti].size;
    CHECK(c->ext <= MAXEXT, "%s: extent %d", types[ti].name, c->ext);
    c->nel = derived ? 6 * size + 6 : 1 + 2 * size;
    c->seg = win_bytes;
    win_bytes += ((MPI_Aint)c->nel * c->ext + 15) / 16 * 16;
    c->obase = slot_bytes;
    slot_bytes += (size_t)size * SLOTS * c->ext;
}

static void combos_init(void)
{
    for (int ti = 0; ti < ntypes; ti++) {
        int g = types[ti].group;
        for (int op = 0; op < NOPS; op++) {
            if (!applies(g, op))
                continue;
            if (op != O_NO_OP) {
                add_combo(K_ACC, ti, op, 0);
                add_combo(K_RACC, ti, op, 0);
            }
            add_combo(K_GACC, ti, op, 0);
            add_combo(K_RGACC, ti, op, 0);
            add_combo(K_FOP, ti, op, 0);
        }
        for (int k = K_PUT; k <= K_RGET; k++)
            if (k == K_PUT || k == K_GET || k == K_RPUT || k == K_RGET)
                add_combo(k, ti, O_REPLACE, 0);
        if (cas_applies(g))
            add_combo(K_CAS, ti, O_REPLACE, 0);
        if (types[ti].derived) {
            int bl[3] = {1, 2, 1}, dp[3] = {0, 2, 5};
            OK(MPI_Type_vector(2, 2, 3, types[ti].dt, &ovec[ti]));
            OK(MPI_Type_commit(&ovec[ti]));
            OK(MPI_Type_indexed(3, bl, dp, types[ti].dt, &tind[ti]));
            OK(MPI_Type_commit(&tind[ti]));
            for (int k = 0; k < NKINDS; k++)
                if (k != K_FOP && k != K_CAS)
                    add_combo(k, ti, base_kind(k) == K_ACC || base_kind(k) == K_GACC ? O_SUM
                                                                                   : O_REPLACE,
                              1);
        }
    }
}

/* Where origin o's accesses of a combination land: target element p, origin slot s, value
 * index e (origin values depend on origin, target and e), shared by all origins or not,
 * and for MPI_Compare_and_swap the role (0 shared, 1 must succeed, 2 must fail). */
typedef struct {
    int p, s, e, shared, role;
} access_t;
static const int tq[4] = {0, 2, 3, 5}, oq[4] = {0, 1, 3, 4};

static int accesses(const combo_t *c, int o, access_t *a)
{
    int n = 0, put = base_kind(c->kind) == K_PUT;
    if (!c->derived) {
        if (!put) /* concurrent puts to one element have no defined result */
            a[n++] = (access_t){0, 0, 0, 1, 0};
        a[n++] = (access_t){1 + 2 * o, 1, 1, 0, 1};
        a[n++] = (access_t){2 + 2 * o, 2, 2, 0, 2};
    } else {
        for (int j = 0; j < 4; j++)
            a[n++] = (access_t){6 * o + tq[j], oq[j], j, 0, 1};
        for (int j = 0; j < 4 && !put; j++)
            a[n++] = (access_t){6 * size + tq[j], 5 + oq[j], 4 + j, 1, 1};
    }
    return n;
}

/* ---------------------------------------------------------------- values */

/* Values stay small so that SUM and PROD are exact in every type, in any order. */
static int value_class(const combo_t *c)
{
    int k = base_kind(c->kind);
    if (k == K_PUT || k == K_GET || k == K_CAS || c->op == O_NO_OP)
        return O_REPLACE;
    return c->op;
}

static int64_t widen(const type_t *ty, int64_t m)
{
    if (ty->size >= 4)
        m |= m << 16;
    if (ty->size >= 8)
        m |= m << 32;
    return m;
}

/* Element p of target t's segment before the epoch. */
static void init_val(const combo_t *c, int t, int p, void *out)
{
    const type_t *ty = &types[c->ti];
    int64_t a, b = 0;
    switch (value_class(c)) {
    case O_SUM: a = 1 + (t + p) % 4, b = p % 3 - 1; break;
    case O_PROD: a = 1 + p % 2, b = p % 2; break;
    case O_MAX:
    case O_MIN: a = (3 * t + p) % 11 - (ty->sgn ? 5 : 0); break;
    case O_BAND:
    case O_BOR:
    case O_BXOR: a = widen(ty, (0x5a + 3 * p + t) & 0x7f); break;
    case O_LAND:
    case O_LOR:
    case O_LXOR: a = (t + p) % 2 ? 3 : 0; break;
    case O_MAXLOC:
    case O_MINLOC: a = 1, b = 50 + p; break;
    default: a = ty->group == G_BOOL ? (p + t + 1) % 2 : 99 - p % 40, b = -1 - p; break;
    }
    ty->set(out, a, b);
}

/* Origin o's value number e for target t. */
static void orig_val(const combo_t *c, int o, int t, int e, void *out)
{
    const type_t *ty = &types[c->ti];
    int64_t a, b = 0, r;
    if (c->kind == K_CAS && ty->group == G_BOOL) { /* two values: swap in the other one */
        bool v;
        init_val(c, t, e == 0 ? 0 : 2 * o + e, &v);
        ty->set(out, !v, 0);
        return;
    }
    switch (value_class(c)) {
    case O_SUM:
        r = (3 * o + 5 * e + 7 * t) % 5, a = ty->sgn ? r - 2 : r, b = (o + e) % 3 - 1;
        break;
    case O_PROD: a = (o + e + t) % 2 == 0 ? 2 : ty->sgn && o % 2 ? -1 : 1, b = o % 2; break;
    case O_MAX:
    case O_MIN: a = (7 * o + 3 * e + 5 * t + 1) % 11 - (ty->sgn ? 5 : 0); break;
    case O_BAND:
    case O_BOR:
    case O_BXOR:
        r = ((o + 1) * 37 + 11 * e + 5 * t) & 0x7f;
        a = widen(ty, c->op == O_BAND ? r | 0x21 : r);
        break;
    case O_LAND:
    case O_LOR:
    case O_LXOR: a = (o + e + t) % 3 == 0 ? 0 : o + 1 + e % 2; break;
    case O_MAXLOC:
    case O_MINLOC: a = (3 * o + e + t) % 4 - 1, b = 10 * o + e + 1; break;
    default:
        a = ty->group == G_BOOL ? (o + e + t) % 2 : 10 + 3 * o + e % 3, b = 100 * o + e;
        break;
    }
    ty->set(out, a, b);
}

/* The final value of an element only origin o accesses. */
static void own_final(const combo_t *c, int o, int t, const access_t *a, void *out)
{
    int k = base_kind(c->kind);
    elem_t v;
    init_val(c, t, a->p, out);
    if (k == K_GET || (k == K_CAS && a->role == 2) || (k != K_CAS && c->op == O_NO_OP))
        return;
    orig_val(c, o, t, a->e, &v);
    if (k == K_PUT || k == K_CAS)
        memcpy(out, &v, c->ext);
    else
        types[c->ti].apply(c->op, out, &v);
}

/* ---------------------------------------------------------------- issuing */

static unsigned char *obuf, *cbuf, *rbuf, *vbuf; /* origin, compare, result, verify slots */
static MPI_Request *reqs;

static unsigned char *slot(unsigned char *buf, const combo_t *c, int t, int s)
{
    return buf + c->obase + ((size_t)t * SLOTS + s) * c->ext;
}

static const char *what(const combo_t *c)
{
    static char s[256];
    int k = base_kind(c->kind), no_op = k == K_PUT || k == K_GET || k == K_CAS;
    snprintf(s, sizeof s, "%s%s %s%s%s, %s, %s", kind_names[c->kind],
             c->derived ? " (derived datatypes)" : "", types[c->ti].name, no_op ? "" : " ",
             no_op ? "" : ops[c->op].name, sync_names[sync_now], flavor_names[flavor_now]);
    return s;
}

static void fail_value(const combo_t *c, const char *where, int p, int who, const void *got,
                       const void *exp, const char *rule)
{
    char g[96], e[96] = "";
    int value_as_modelled = 0;
    types[c->ti].show(got, g);
    if (exp)
        types[c->ti].show(exp, e);
    CHECK(value_as_modelled, "%s: %s element %d (rank %d) = %s, expected %s%s", what(c), where,
          p, who, g, e, rule);
}

/* Fills the origin and compare slots of every combination for every target. */
static void fill_origin(void)
{
    access_t a[8];
    for (int i = 0; i < ncombos; i++) {
        const combo_t *c = &combos[i];
        for (int t = 0; t < size; t++) {
            int na = accesses(c, rank, a);
            for (int j = 0; j < na; j++) {
                orig_val(c, rank, t, a[j].e, slot(obuf, c, t, a[j].s));
                if (a[j].role == 2) /* a compare value that is not there */
                    orig_val(c, rank, t, a[j].e, slot(cbuf, c, t, a[j].s));
                else
                    init_val(c, t, a[j].p, slot(cbuf, c, t, a[j].s));
            }
        }
    }
    memset(rbuf, 0xcd, slot_bytes);
}

/* Once the origin buffers for target t may be reused, they are: any later read of them
 * by the library would show in the target's values. */
static void clobber(int t)
{
    for (int i = 0; i < ncombos; i++) {
        memset(slot(obuf, &combos[i], t, 0), 0xee, SLOTS * combos[i].ext);
        memset(slot(cbuf, &combos[i], t, 0), 0xee, SLOTS * combos[i].ext);
    }
}

/* One call of combination c's function to target t: origin (and result, compare) data at
 * byte `off` of the slots, `oc` of `ot` there; `tc` of `tt` at displacement `disp`. */
static void call(const combo_t *c, int t, MPI_Win win, MPI_Aint off, int oc, MPI_Datatype ot,
                 MPI_Aint disp, int tc, MPI_Datatype tt, MPI_Request **r)
{
    unsigned char *ob = slot(obuf, c, t, 0) + off, *rb = slot(rbuf, c, t, 0) + off;
    unsigned char *cb = slot(cbuf, c, t, 0) + off;
    MPI_Op op = ops[c->op].op;
    int rc = MPI_ERR_OTHER, len = 0;
    char msg[MPI_MAX_ERROR_STRING] = "";
    switch (c->kind) {
    case K_PUT: rc = MPI_Put(ob, oc, ot, t, disp, tc, tt, win); break;
    case K_RPUT: rc = MPI_Rput(ob, oc, ot, t, disp, tc, tt, win, (*r)++); break;
    case K_GET: rc = MPI_Get(rb, oc, ot, t, disp, tc, tt, win); break;
    case K_RGET: rc = MPI_Rget(rb, oc, ot, t, disp, tc, tt, win, (*r)++); break;
    case K_ACC: rc = MPI_Accumulate(ob, oc, ot, t, disp, tc, tt, op, win); break;
    case K_RACC: rc = MPI_Raccumulate(ob, oc, ot, t, disp, tc, tt, op, win, (*r)++); break;
    case K_GACC:
        rc = MPI_Get_accumulate(ob, oc, ot, rb, oc, ot, t, disp, tc, tt, op, win);
        break;
    case K_RGACC:
        rc = MPI_Rget_accumulate(ob, oc, ot, rb, oc, ot, t, disp, tc, tt, op, win, (*r)++);
        break;
    case K_FOP: rc = MPI_Fetch_and_op(ob, rb, ot, t, disp, op, win); break;
    case K_CAS: rc = MPI_Compare_and_swap(ob, cb, rb, ot, t, disp, win); break;
    }
    if (rc != MPI_SUCCESS) /* the window's error handler is MPI_ERRORS_RETURN */
        MPI_Error_string(rc, msg, &len);
    CHECK(rc == MPI_SUCCESS, "%s, to rank %d: %s", what(c), t, msg);
}

/* Issues combination c from this rank to target t (window displacement tb of its base):
 * plain, element 0 with count 1 and the own elements with count 2 (one at a time for
 * the single-element atomics); derived, the own and the shared region (see accesses). */
static void issue(const combo_t *c, int t, MPI_Win win, MPI_Aint tb, int *nreq)
{
    MPI_Datatype dt = types[c->ti].dt;
    MPI_Aint x = c->ext, d = tb + c->seg, d1 = d + (1 + 2 * rank) * x;
    int put = base_kind(c->kind) == K_PUT;
    MPI_Request *r = reqs + *nreq;
    if (c->derived) {
        MPI_Datatype ov = ovec[c->ti], td = tind[c->ti];
        call(c, t, win, 0, 1, ov, d + 6 * rank * x, 1, td, &r);
        if (!put)
            call(c, t, win, 5 * x, 1, ov, d + 6 * size * x, 1, td, &r);
    } else if (c->kind == K_FOP || c->kind == K_CAS) {
        for (int s = 0; s < 3; s++)
            call(c, t, win, s * x, 1, dt, s == 0 ? d : d1 + (s - 1) * x, 1, dt, &r);
    } else {
        if (!put) /* concurrent puts to one element have no defined result */
            call(c, t, win, 0, 1, dt, d, 1, dt, &r);
        call(c, t, win, x, 2, dt, d1, 2, dt, &r);
    }
    *nreq = (int)(r - reqs);
}

static void issue_all(int t, MPI_Win win, const MPI_Aint *tb, int *nreq)
{
    for (int i = 0; i < ncombos; i++)
        if (issued(&combos[i]) && hits(&combos[i], t))
            issue(&combos[i], t, win, tb[t], nreq);
}

/* Under lock_all + flush: after MPI_Win_flush(t) a get sees this origin's own elements of
 * every plain (not derived) combination at their final values. */
static void verify_flushed(int t, MPI_Win win, const MPI_Aint *tb)
{
    access_t a[8];
    for (int i = 0; i < ncombos; i++) {
        const combo_t *c = &combos[i];
        if (c->derived || !issued(c) || !hits(c, t))
            continue;
        MPI_Aint d1 = tb[t] + c->seg + (MPI_Aint)(1 + 2 * rank) * c->ext;
        OK(MPI_Get(slot(vbuf, c, t, 1), 2, types[c->ti].dt, t, d1, 2, types[c->ti].dt, win));
    }
    OK(MPI_Win_flush(t, win));
    for (int i = 0; i < ncombos; i++) {
        const combo_t *c = &combos[i];
        if (c->derived || !issued(c) || !hits(c, t))
            continue;
        int na = accesses(c, rank, a);
        for (int j = 0; j < na; j++) {
            elem_t exp;
            if (a[j].shared)
                continue;
            own_final(c, rank, t, &a[j], &exp);
            const unsigned char *got = slot(vbuf, c, t, a[j].s);
            if (!types[c->ti].eq(got, &exp))
                fail_value(c, "get after MPI_Win_flush:", a[j].p, t, got, &exp, "");
        }
    }
}

/* ---------------------------------------------------------------- checking */

/* Whether `got` is the value of element e (initially `init`) after the op of some subset
 * of the other origins (commutative ops: the order does not matter), or for MPI_REPLACE
 * and MPI_Compare_and_swap one of their values. With more than 8 other origins (2^8
 * subsets) any value passes. */
static int partial(const combo_t *c, int t, int e, const void *init, const void *got)
{
    const type_t *ty = &types[c->ti];
    int others[64], m = 0;
    elem_t x, v;
    if (ty->eq(got, init))
        return 1;
    for (int q = 0; q < size; q++)
        if (q != rank && m < 64)
            others[m++] = q;
    if (c->kind == K_CAS || c->op == O_REPLACE) {
        for (int i = 0; i < m; i++) {
            orig_val(c, others[i], t, e, &v);
            if (ty->eq(got, &v))
                return 1;
        }
        return 0;
    }
    if (m > 8)
        return 1;
    for (unsigned mask = 1; mask < 1u << m; mask++) {
        memcpy(&x, init, c->ext);
        for (int i = 0; i < m; i++)
            if (mask & 1u << i) {
                orig_val(c, others[i], t, e, &v);
                ty->apply(c->op, &x, &v);
            }
        if (ty->eq(got, &x))
            return 1;
    }
    return 0;
}

/* My segment of combination c (`seg`, a copy of my window's memory) against the model. */
static void check_target(const combo_t *c, const unsigned char *seg, int *mark, elem_t *ex)
{
    const type_t *ty = &types[c->ti];
    int k = base_kind(c->kind), x = c->ext;
    access_t a[8];
    elem_t v;
    for (int p = 0; p < c->nel; p++) {
        init_val(c, rank, p, &ex[p]);
        mark[p] = -1;
    }
    if (issued(c) && hits(c, rank) && k != K_GET)
        for (int o = 0; o < size; o++) {
            int na = accesses(c, o, a);
            for (int j = 0; j < na; j++) {
                int p = a[j].p;
                if (!a[j].shared) {
                    own_final(c, o, rank, &a[j], &ex[p]);
                } else if (k == K_CAS || c->op == O_REPLACE) {
                    mark[p] = a[j].e; /* one of the origins' values */
                } else if (c->op != O_NO_OP) {
                    orig_val(c, o, rank, a[j].e, &v);
                    ty->apply(c->op, &ex[p], &v);
                }
            }
        }
    for (int p = 0; p < c->nel; p++) {
        const unsigned char *got = seg + (size_t)p * x;
        if (mark[p] < 0) {
            if (!ty->eq(got, &ex[p]))
                fail_value(c, "target", p, rank, got, &ex[p], "");
            continue;
        }
        int found = 0;
        for (int o = 0; o < size && !found; o++) {
            orig_val(c, o, rank, mark[p], &v);
            found = ty->eq(got, &v);
        }
        if (!found)
            fail_value(c, "target", p, rank, got, NULL, "one of the origins' values");
    }
}

/* What this rank fetched from every target. */
static void check_results(const combo_t *c)
{
    access_t a[8];
    elem_t iv;
    int k = base_kind(c->kind);
    if (!issued(c) || !fetches(c->kind))
        return;
    for (int t = 0; t < size; t++) {
        if (!hits(c, t))
            continue;
        int na = accesses(c, rank, a);
        for (int j = 0; j < na; j++) {
            const unsigned char *got = slot(rbuf, c, t, a[j].s);
            init_val(c, t, a[j].p, &iv);
            if (k == K_GET || !a[j].shared || (k != K_CAS && c->op == O_NO_OP)) {
                if (!types[c->ti].eq(got, &iv))
                    fail_value(c, "fetched", a[j].p, t, got, &iv, "");
            } else if (!partial(c, t, a[j].e, &iv, got)) {
                fail_value(c, "fetched", a[j].p, t, got, &iv,
                           " or a value the other origins' ops can make of it");
            }
        }
    }
}

/* Compare_and_swap on a shared element: exactly one origin saw the initial value and
 * swapped in its value, which is the final one, and every other origin fetched it. */
static void check_cas(const unsigned char *seg0)
{
    int ncas = 0;
    for (int i = 0; i < ncombos; i++)
        ncas += combos[i].kind == K_CAS;
    size_t bytes = (size_t)size * ncas * MAXEXT + 1;
    unsigned char *snd = malloc(bytes), *rcv = malloc(bytes);
    CHECK(snd && rcv, "malloc");
    for (int t = 0; t < size; t++)
        for (int i = 0, j = 0; i < ncombos; i++)
            if (combos[i].kind == K_CAS)
                memcpy(snd + ((size_t)t * ncas + j++) * MAXEXT, slot(rbuf, &combos[i], t, 0),
                       combos[i].ext);
    OK(MPI_Alltoall(snd, ncas * MAXEXT, MPI_BYTE, rcv, ncas * MAXEXT, MPI_BYTE,
                    MPI_COMM_WORLD));
    for (int i = 0, j = -1; i < ncombos; i++) {
        const combo_t *c = &combos[i];
        if (c->kind != K_CAS || (j++, !hits(c, rank)))
            continue;
        const type_t *ty = &types[c->ti];
        const unsigned char *fin = seg0 + c->seg;
        elem_t iv, v;
        init_val(c, rank, 0, &iv);
        int winners = 0;
        for (int o = 0; o < size; o++) {
            const unsigned char *f = rcv + ((size_t)o * ncas + j) * MAXEXT;
            if (ty->eq(f, &iv)) {
                winners++;
                orig_val(c, o, rank, 0, &v);
                if (!ty->eq(fin, &v))
                    fail_value(c, "target (CAS winner's value)", 0, rank, fin, &v, "");
            } else if (!ty->eq(f, fin)) {
                fail_value(c, "losing CAS fetched", 0, o, f, fin, " (the winner's value)");
            }
        }
        CHECK(winners == 1, "%s: %d origins fetched the initial value of shared element 0",
              what(c), winners);
    }
    free(snd);
    free(rcv);
}

/* ---------------------------------------------------------------- epochs */

/* A barrier that sleeps while it waits (see rma_sync.c): with more ranks than cores,
 * busy-waiting ranks take the CPU that passive-target progress on a peer needs. */
static void sleepy_barrier(void)
{
    MPI_Request r;
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    for (int flag = 0; !flag;) {
        OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        if (!flag)
            usleep(100);
    }
}

static void epoch(MPI_Win win, const MPI_Aint *tb)
{
    int nreq = 0, flag = 0;
    MPI_Group g;
    switch (sync_now) {
    case S_FENCE:
        OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
        for (int i = 0; i < size; i++)
            issue_all((rank + i) % size, win, tb, &nreq);
        OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
        break;
    case S_PSCW: /* every rank exposes to and accesses every rank */
        OK(MPI_Win_get_group(win, &g));
        OK(MPI_Win_post(g, 0, win));
        OK(MPI_Win_start(g, 0, win));
        for (int i = 0; i < size; i++)
            issue_all((rank + i) % size, win, tb, &nreq);
        OK(MPI_Win_complete(win));
        OK(MPI_Win_wait(win));
        OK(MPI_Group_free(&g));
        break;
    case S_LOCK_SHARED: /* shared locks on all targets at once, requests in MPI_Waitall */
        for (int i = 0; i < size; i++)
            OK(MPI_Win_lock(MPI_LOCK_SHARED, (rank + i) % size, 0, win));
        for (int i = 0; i < size; i++)
            issue_all((rank + i) % size, win, tb, &nreq);
        OK(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
        for (int i = 0; i < size; i++)
            OK(MPI_Win_unlock((rank + i) % size, win));
        break;
    case S_LOCK_EXCL: /* one exclusive lock at a time, requests in MPI_Wait */
        for (int i = 0; i < size; i++) {
            int t = (rank + i) % size;
            OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
            nreq = 0;
            issue_all(t, win, tb, &nreq);
            for (int j = 0; j < nreq; j++)
                OK(MPI_Wait(&reqs[j], MPI_STATUS_IGNORE));
            OK(MPI_Win_unlock(t, win));
            clobber(t);
        }
        break;
    case S_FLUSH: /* requests polled with MPI_Testall, then flush and read back */
        OK(MPI_Win_lock_all(0, win));
        for (int i = 0; i < size; i++) {
            int t = (rank + i) % size;
            nreq = 0;
            issue_all(t, win, tb, &nreq);
            for (flag = 0; !flag;)
                OK(MPI_Testall(nreq, reqs, &flag, MPI_STATUSES_IGNORE));
            OK(MPI_Win_flush(t, win));
            clobber(t);
            verify_flushed(t, win, tb);
        }
        OK(MPI_Win_unlock_all(win));
        break;
    case S_FLUSH_LOCAL: /* origin buffers overwritten right after flush_local */
        OK(MPI_Win_lock_all(0, win));
        for (int i = 0; i < size; i++) {
            int t = (rank + i) % size;
            nreq = 0;
            issue_all(t, win, tb, &nreq);
            OK(MPI_Win_flush_local(t, win));
            clobber(t);
            OK(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
        }
        OK(MPI_Win_unlock_all(win));
        break;
    }
    for (int t = 0; t < size; t++)
        clobber(t);
}

/* Counts of what ran: combination runs per function, cells. */
static long runs[NKINDS];
static int cells;

/* One window of one flavor; on it one epoch of every synchronization mode, each checked. */
static void flavor(int f, MPI_Comm shm)
{
    MPI_Win win;
    unsigned char *base = NULL, *mem = NULL;
    MPI_Aint *tb = calloc(size, sizeof(MPI_Aint));
    unsigned char *copy = malloc(win_bytes);
    int *mark = malloc((6 * size + 6) * sizeof(int));
    elem_t *ex = malloc((6 * size + 6) * sizeof(elem_t));
    CHECK(tb && copy && mark && ex, "malloc");
    flavor_now = f;
    switch (f) {
    case F_CREATE:
        mem = base = malloc(win_bytes);
        CHECK(mem != NULL, "malloc");
        OK(MPI_Win_create(base, win_bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        break;
    case F_ALLOCATE:
        OK(MPI_Win_allocate(win_bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
        break;
    case F_SHARED:
        OK(MPI_Win_allocate_shared(win_bytes, 1, MPI_INFO_NULL, shm, &base, &win));
        break;
    case F_DYNAMIC:
        mem = base = malloc(win_bytes);
        CHECK(mem != NULL, "malloc");
        OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        OK(MPI_Win_attach(win, base, win_bytes));
        OK(MPI_Get_address(base, &tb[rank]));
        OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, tb, 1, MPI_AINT, MPI_COMM_WORLD));
        break;
    }
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    for (int s = 0; s < NSYNCS; s++) {
        if (sync_only && !strstr(sync_names[s], sync_only))
            continue;
        double t0 = MPI_Wtime();
        sync_now = s;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
        for (int i = 0; i < ncombos; i++)
            for (int p = 0; p < combos[i].nel; p++)
                init_val(&combos[i], rank, p, base + combos[i].seg + (size_t)p * combos[i].ext);
        OK(MPI_Win_unlock(rank, win));
        fill_origin();
        OK(MPI_Barrier(MPI_COMM_WORLD));

        epoch(win, tb);

        sleepy_barrier();
        OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
        memcpy(copy, base, win_bytes);
        OK(MPI_Win_unlock(rank, win));
        for (int i = 0; i < ncombos; i++) {
            check_target(&combos[i], copy + combos[i].seg, mark, ex);
            check_results(&combos[i]);
            for (int t = 0; t < size; t++)
                runs[combos[i].kind] += issued(&combos[i]) && hits(&combos[i], t);
        }
        check_cas(copy);
        cells++;
        if (verbose && rank == 0)
            printf("rma_matrix: %s, %s: %.2f s\n", flavor_names[f], sync_names[s],
                   MPI_Wtime() - t0);
    }
    if (f == F_DYNAMIC)
        OK(MPI_Win_detach(win, base));
    OK(MPI_Win_free(&win));
    free(mem);
    free(copy);
    free(mark);
    free(ex);
    free(tb);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    for (int i = 1; i < argc; i++) {
        const char *next = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "-v") == 0)
            verbose = 1;
        else if (strcmp(argv[i], "-only") == 0 && nonly < 16)
            only[nonly++] = next, i++;
        else if (strcmp(argv[i], "-skip") == 0 && nskip < 16)
            skip[nskip++] = next, i++;
        else if (strcmp(argv[i], "-full") == 0)
            full = 1;
        else if (strcmp(argv[i], "-flavor") == 0)
            flavor_only = next, i++;
        else if (strcmp(argv[i], "-sync") == 0)
            sync_only = next, i++;
    }
    ops_init();
    types_init();
    combos_init();
    win_bytes += 16; /* never empty, whatever the filters leave */
    obuf = malloc(slot_bytes + 16), cbuf = malloc(slot_bytes + 16);
    rbuf = malloc(slot_bytes + 16), vbuf = malloc(slot_bytes + 16);
    reqs = malloc((2 * (size_t)ncombos * size + 1) * sizeof(MPI_Request));
    CHECK(obuf && cbuf && rbuf && vbuf && reqs, "malloc");

    MPI_Comm shm;
    int nshm = 0;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm));
    OK(MPI_Comm_size(shm, &nshm));
    int all_shared = nshm == size, everywhere = 0;
    OK(MPI_Allreduce(&all_shared, &everywhere, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0 && !everywhere)
        printf("rma_matrix: MPI_Win_allocate_shared skipped: the MPI_COMM_TYPE_SHARED split "
               "has %d of %d ranks\n", nshm, size);

    double t0 = MPI_Wtime();
    for (int f = 0; f < NFLAVORS; f++)
        if ((f != F_SHARED || everywhere) &&
            (!flavor_only || strstr(flavor_names[f], flavor_only)))
            flavor(f, shm);
    if (rank == 0) {
        int pairs = 0;
        long all = 0;
        for (int ti = 0; ti < ntypes; ti++)
            for (int op = 0; op < NOPS; op++)
                pairs += op != O_NO_OP && applies(types[ti].group, op);
        printf("rma_matrix: %d types, %d (type, op) pairs for accumulates, %d combinations, "
               "%d cells (flavor x sync) in %.1f s; (combination, target) runs from rank 0:",
               ntypes, pairs, ncombos, cells, MPI_Wtime() - t0);
        for (int k = 0; k < NKINDS; k++)
            printf(" %s %ld", kind_names[k], runs[k]), all += runs[k];
        printf(" (%ld in all)\n", all);
    }
    for (int ti = 0; ti < ntypes; ti++)
        if (types[ti].derived) {
            OK(MPI_Type_free(&ovec[ti]));
            OK(MPI_Type_free(&tind[ti]));
        }
    OK(MPI_Comm_free(&shm));
    free(obuf), free(cbuf), free(rbuf), free(vbuf), free(reqs), free(combos);
    test_pass("rma_matrix");
    return 0;
}
