// ceil() for libvsync. The Embedded Swift stdlib's Dictionary calls it when it sizes a table,
// and glibc's static libm cannot go into a shared object (its ceil is an ifunc on the loader's
// CPU data), so without this the library would need libm.so.6 beside libc. The version script
// keeps the symbol local: programs linking libvsync still get libm's.
#include "vsync_ceil.h"

double ceil(double x) {
    // NaN, infinities and |x| >= 2^52 are integers already.
    if (!(x == x) || x >= 4503599627370496.0 || x <= -4503599627370496.0) return x;
    double t = (double)(long long)x;  // toward zero: exact, |x| < 2^52
    if (t < x) t += 1.0;
    // x in (-1, 0] rounds to zero with x's sign: ceil(-0.5) is -0.0.
    if (t == 0.0) return x * 0.0;
    return t;
}
