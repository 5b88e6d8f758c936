/*
 * interleave.c - wall time of `sh FILE` for several files, run in turn.
 *
 *   interleave RUNS WARMUP FILE...
 *
 * Each run goes through every file once (starting one file further along
 * each time), so a burst of load from a neighbour lands on every row
 * alike instead of on whichever row hyperfine was measuring then: on a
 * shared machine the rows' differences stay readable when their absolute
 * times do not. Prints one line per file: the median, the quartiles and
 * the minimum in milliseconds; a run that fails is counted and reported.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs `sh file` with stdout on /dev/null; its wall time in ms, or -1. */
static double run_once(const char *file)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        execlp("sh", "sh", file, (char *)NULL);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return (double)(b.tv_sec - a.tv_sec) * 1e3 +
           (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fputs("usage: interleave RUNS WARMUP FILE...\n", stderr);
        return 2;
    }
    int runs = atoi(argv[1]), warm = atoi(argv[2]), k = argc - 3;
    if (runs < 1 || warm < 0) {
        fputs("interleave: RUNS must be 1 or more, WARMUP 0 or more\n", stderr);
        return 2;
    }
    double *t = calloc((size_t)runs * (size_t)k, sizeof *t);
    int *failed = calloc((size_t)k, sizeof *failed);
    if (!t || !failed)
        return 1;
    for (int w = 0; w < warm; w++)
        for (int j = 0; j < k; j++)
            run_once(argv[3 + j]);
    for (int i = 0; i < runs; i++)
        for (int step = 0; step < k; step++) {
            int j = (step + i) % k;
            double ms = run_once(argv[3 + j]);
            if (ms < 0)
                failed[j]++;
            t[j * runs + i] = ms;
        }
    for (int j = 0; j < k; j++) {
        double *row = t + j * runs;
        qsort(row, (size_t)runs, sizeof *row, cmp_double);
        int ok = runs - failed[j];
        if (ok == 0) {
            printf("%s failed=%d\n", argv[3 + j], failed[j]);
            continue;
        }
        double *good = row + failed[j]; /* the failures sort first (-1) */
        printf("%s median=%.2f p25=%.2f p75=%.2f min=%.2f failed=%d\n",
               argv[3 + j], good[ok / 2], good[ok / 4], good[(3 * ok) / 4],
               good[0], failed[j]);
    }
    free(t);
    free(failed);
    return 0;
}
