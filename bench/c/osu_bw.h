/*
 * Shared by the bandwidth C benchmarks (osu_bw.c, osu_bibw.c, osu_mbw_mr.c): options (-W window included),
 * help and start-up, so that each benchmark file holds only its loop. The including file
 * defines TITLE (the benchmark's title line) and NAME (its program name) first.
 */
#ifndef KESTREL_OSU_BW_H
#define KESTREL_OSU_BW_H

#if !defined(TITLE) || !defined(NAME)
#error "define TITLE and NAME before including osu_bw.h"
#endif

#define OSU_MIN_SIZE 1
#define OSU_MAX_SIZE (1 << 22)
#define OSU_ITERATIONS 100
#define OSU_ITERATIONS_LARGE 20
#define OSU_SKIP 10
#define OSU_SKIP_LARGE 2
#include "osu_opts.h"

static void help(void)
{
    printf("Usage: %s [options]\nOptions:\n", NAME);
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
    printf("  -W, --window-size         SIZE - set number of messages to send before synchronization (default 64)\n");
#ifdef OSU_MBW
    printf("  -p, --pairs               PAIRS - number of pairs involved (default np / 2)\n");
    printf("  -R, --print-rate          PRINT_RATE - print message rate if set to 1 (default 1)\n");
#endif
    printf("  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n");
    printf("%28s(default 536870912)\n", "");
}

/* OSU's set_message_size: MAX, MIN:MAX, MIN: or :MAX. */
#endif /* KESTREL_OSU_BW_H */
