// libdrm's public headers, as one module. Only VsyncDRM imports this.
#include <stdint.h>
#include <xf86drm.h>
#include <xf86drmMode.h>
