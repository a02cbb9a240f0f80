/*
 * Large messages between two ranks, checked byte for byte, in the shapes that matter to a
 * transport that lets the receiver read the sender's buffer (the ofi transport's RMA
 * rendezvous, issue 18) and keeps the buffer's registration for reuse: one buffer sent many
 * times with new contents, a part of it, a buffer unmapped and mapped again at the same
 * address with other contents (it must be read as it is now), both ranks reading each
 * other's buffer at once, and many nonblocking messages in flight. 2 ranks.
 *
 * With KESTREL_TEST_OFI_RMA set (Kestrel over --mca btl self,ofi between hosts), each rank
 * also prints its ofi counters (MPI_T performance variables) as
 * "COUNTERS rank <r> reads <n> registrations <n> reused <n>".
 */
#include "check.h"

#include <stdint.h>
#include <sys/mman.h>

#define LEN (1 << 20)
#define REPEATS 20
#define PIECES 8

static unsigned char byte_at(size_t i, int seed)
{
    return (unsigned char)((i * 31u + (size_t)seed * 7u + (i >> 12)) & 0xff);
}

static void fill(unsigned char *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = byte_at(i, seed);
}

static void expect(const unsigned char *p, size_t n, int seed, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(p[i] == byte_at(i, seed), "%s: byte %zu = %u, expected %u", what, i, p[i],
              byte_at(i, seed));
}

static unsigned char *map(void *at)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0);
    void *p = mmap(at, LEN, PROT_READ | PROT_WRITE, flags, -1, 0);
    CHECK(p != MAP_FAILED, "mmap of %d bytes failed", LEN);
    return p;
}

static unsigned long long counter(const char *name)
{
    int i = -1, count;
    OK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &i));
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    OK(MPI_T_pvar_session_create(&s));
    OK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count));
    unsigned long long v = 0;
    OK(MPI_T_pvar_read(s, h, &v));
    OK(MPI_T_pvar_session_free(&s));
    return v;
}

int main(int argc, char **argv)
{
    int provided, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "run with 2 ranks, not %d", size);
    int peer = 1 - check_rank;
    unsigned char *buf = map(NULL);

    /* One buffer, sent again and again with new contents. */
    for (int r = 0; r < REPEATS; r++) {
        if (check_rank == 0) {
            fill(buf, LEN, r);
            OK(MPI_Send(buf, LEN, MPI_BYTE, 1, r, MPI_COMM_WORLD));
        } else {
            memset(buf, 0, LEN);
            OK(MPI_Recv(buf, LEN, MPI_BYTE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            expect(buf, LEN, r, "repeated buffer");
        }
    }

    /* A part of it: the quarter starting at its middle. */
    if (check_rank == 0) {
        fill(buf, LEN, 100);
        OK(MPI_Send(buf + LEN / 2, LEN / 4, MPI_BYTE, 1, 100, MPI_COMM_WORLD));
    } else {
        memset(buf, 0, LEN);
        OK(MPI_Recv(buf, LEN / 4, MPI_BYTE, 0, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        unsigned char *want = malloc(LEN);
        fill(want, LEN, 100);
        CHECK(memcmp(buf, want + LEN / 2, LEN / 4) == 0, "the middle quarter differs");
        free(want);
    }

    /* The memory unmapped and mapped again at the same address, with other contents. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(munmap(buf, LEN) == 0, "munmap");
    unsigned char *again = map(buf);
    CHECK(again == buf, "mapped at %p, not %p", (void *)again, (void *)buf);
    if (check_rank == 0) {
        fill(buf, LEN, 200);
        OK(MPI_Send(buf, LEN, MPI_BYTE, 1, 200, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(buf, LEN, MPI_BYTE, 0, 200, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect(buf, LEN, 200, "buffer mapped again");
    }

    /* Both ranks read each other's buffer at once. */
    unsigned char *in = map(NULL);
    fill(buf, LEN, 300 + check_rank);
    OK(MPI_Sendrecv(buf, LEN, MPI_BYTE, peer, 300, in, LEN, MPI_BYTE, peer, 300, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    expect(in, LEN, 300 + peer, "exchanged buffer");

    /* Many in flight: PIECES slices each way, completed together. */
    MPI_Request reqs[2 * PIECES];
    fill(buf, LEN, 400 + check_rank);
    memset(in, 0, LEN);
    for (int k = 0; k < PIECES; k++) {
        size_t at = (size_t)k * (LEN / PIECES);
        OK(MPI_Irecv(in + at, LEN / PIECES, MPI_BYTE, peer, 400 + k, MPI_COMM_WORLD, &reqs[k]));
        OK(MPI_Isend(buf + at, LEN / PIECES, MPI_BYTE, peer, 400 + k, MPI_COMM_WORLD,
                     &reqs[PIECES + k]));
    }
    OK(MPI_Waitall(2 * PIECES, reqs, MPI_STATUSES_IGNORE));
    expect(in, LEN, 400 + peer, "slices");

    if (getenv("KESTREL_TEST_OFI_RMA")) {
        printf("COUNTERS rank %d reads %llu registrations %llu reused %llu\n", check_rank,
               counter("ofi_rma_reads"), counter("ofi_registrations"),
               counter("ofi_registrations_reused"));
    }
    munmap(in, LEN);
    munmap(buf, LEN);
    OK(MPI_T_finalize());
    printf("PASS ofi_rma rank %d\n", check_rank);
    OK(MPI_Finalize());
    return 0;
}
