/*
 * Shared by the bandwidth C benchmarks (osu_bw.c, osu_bibw.c): options (-W window included),
 * help and start-up, so that each benchmark file holds only its loop. The including file
 * defines TITLE (the benchmark's title line) and NAME (its program name) first.
 */
#ifndef KESTREL_OSU_BW_H
#define KESTREL_OSU_BW_H

#if !defined(TITLE) || !defined(NAME)
#error "define TITLE and NAME before including osu_bw.h"
#endif

#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERSION "7.4"
#define LARGE_MESSAGE_SIZE 8192
#define MEM_LIMIT_DEFAULT (512L * 1024 * 1024)
#define MEM_LIMIT_MIN (1L * 1024 * 1024)

static size_t min_size = 1, max_size = 1 << 22;
static long iterations = 100, iterations_large = 20, skip = 10, skip_large = 2;
static long window = 64;
static long mem_limit = MEM_LIMIT_DEFAULT;
static int mem_warning = 0;

enum { OK, HELP, VERSION_MSG, BAD };
static const char *bad_message;
static char bad_option[64];
static const char *bad_arg;

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
    printf("  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n");
    printf("%28s(default 536870912)\n", "");
}

/* OSU's set_message_size: MAX, MIN:MAX, MIN: or :MAX. */
static int set_message_size(const char *val)
{
    int colons = 0;
    for (const char *p = val; *p; p++)
        colons += *p == ':';
    if (colons == 0) {
        long long v = atoll(val);
        if (v < 0)
            return -1;
        max_size = (size_t)v;
        return 0;
    }
    if (colons > 1)
        return -1;
    const char *c = strchr(val, ':');
    int has1 = c != val, has2 = c[1] != '\0';
    if (has1 && has2) {
        long long a = atoll(val), b = atoll(c + 1);
        if (a > 0)
            min_size = (size_t)a;
        if (b < 0)
            return -1;
        max_size = (size_t)b;
        return 0;
    }
    if (has2) {
        long long b = atoll(c + 1);
        if (b < 0)
            return -1;
        max_size = (size_t)b;
        return 0;
    }
    if (has1) {
        long long a = atoll(val);
        if (a <= 0)
            return -1;
        min_size = (size_t)a;
        return 0;
    }
    return -1;
}

static int parse(int argc, char **argv)
{
    static const struct option longs[] = {
        {"help", no_argument, 0, 'h'},          {"version", no_argument, 0, 'v'},
        {"message-size", required_argument, 0, 'm'}, {"warmup", required_argument, 0, 'x'},
        {"iterations", required_argument, 0, 'i'},   {"mem-limit", required_argument, 0, 'M'},
        {"window-size", required_argument, 0, 'W'},
        {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hvm:x:i:W:M:", longs, NULL)) != -1) {
        snprintf(bad_option, sizeof bad_option, "-%c", c);
        bad_arg = optarg;
        switch (c) {
        case 'h': return HELP;
        case 'v': return VERSION_MSG;
        case 'm':
            if (set_message_size(optarg)) { bad_message = "Invalid Message Size"; return BAD; }
            break;
        case 'i':
            if (atoi(optarg) < 1) { bad_message = "Invalid Number of Iterations"; return BAD; }
            iterations = iterations_large = atoi(optarg);
            break;
        case 'x':
            if (atoi(optarg) < 0) { bad_message = "Invalid Number of Warmup Iterations"; return BAD; }
            skip = skip_large = atoi(optarg);
            break;
        case 'W':
            if (atoi(optarg) < 1) { bad_message = "Invalid Window Size"; return BAD; }
            window = atoi(optarg);
            break;
        case 'M':
            mem_limit = atoll(optarg);
            if (mem_limit < MEM_LIMIT_MIN) { mem_limit = MEM_LIMIT_MIN; mem_warning = 1; }
            break;
        case ':':
            bad_message = "Option Missing Required Argument";
            snprintf(bad_option, sizeof bad_option, "-%c", optopt);
            bad_arg = NULL;
            return BAD;
        default:
            bad_message = "Invalid option";
            bad_arg = NULL;
            if (optopt)
                snprintf(bad_option, sizeof bad_option, "-%c", optopt);
            else
                snprintf(bad_option, sizeof bad_option, "%.*s", (int)strcspn(argv[optind - 1], "="),
                         argv[optind - 1]);
            return BAD;
        }
    }
    return OK;
}

#endif /* KESTREL_OSU_BW_H */
