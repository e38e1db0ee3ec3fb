/* Prints the host's TSC rate in kHz, for vm-run.sh: under qemu TCG the guest's rdtsc reads the
 * host's TSC, and the guest, which has no HPET or ACPI PM timer, can only calibrate it against
 * the emulated PIT, which fails on a busy host. The kernel then marks the TSC unstable and runs
 * on jiffies without high-resolution timers, so every guest timer (vkms's vblanks too) lands on
 * the 250 Hz tick. vm-run.sh passes this rate as tsc_early_khz= so the guest never calibrates.
 *
 * Each end of a 100 ms span is the tightest of 9 (clock, rdtsc, clock) readings, so a
 * preemption between the two reads cannot skew it: a few ppm at worst. */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A (time, tsc) pair: the tsc read between the two clock reads closest together. */
static void pair(double *ns, double *tsc) {
    int64_t best = INT64_MAX;
    for (int i = 0; i < 9; i++) {
        int64_t a = now_ns();
        uint64_t c = __rdtsc();
        int64_t b = now_ns();
        if (b - a < best) {
            best = b - a;
            *ns = (double)a + (double)(b - a) / 2;
            *tsc = (double)c;
        }
    }
}

int main(void) {
    double ns0, tsc0, ns1, tsc1;
    pair(&ns0, &tsc0);
    struct timespec span = {0, 100000000};
    nanosleep(&span, NULL);
    pair(&ns1, &tsc1);
    if (ns1 <= ns0 || tsc1 <= tsc0) return 1;
    printf("%.0f\n", (tsc1 - tsc0) / (ns1 - ns0) * 1e6);
    return 0;
}
