// See ceil.c: libvsync's own ceil(), so it needs no libm.
double ceil(double x);
