// Test double of the standalone BSP's xil_cache.h. Here the kernel's C model shares the host's memory, so a flush
// or an invalidate moves nothing; the flushed ranges are kept, so that the driver's double can refuse to start the
// IP on a buffer the host did not flush (on the board its HP ports would read the DDR under stale cache lines).
#ifndef HDSE_STANDIN_XIL_CACHE_H
#define HDSE_STANDIN_XIL_CACHE_H
#include <utility>
#include <vector>

#include "xil_types.h"
inline std::vector<std::pair<INTPTR, INTPTR>> &hdse_flushed() {
  static std::vector<std::pair<INTPTR, INTPTR>> ranges;
  return ranges;
}
inline void Xil_DCacheFlushRange(INTPTR at, INTPTR bytes) { hdse_flushed().emplace_back(at, at + bytes); }
inline void Xil_DCacheInvalidateRange(INTPTR, INTPTR) {}
// whether the ``bytes`` from ``at`` were flushed, by one range
inline bool hdse_was_flushed(INTPTR at, INTPTR bytes) {
  for (const auto &r : hdse_flushed())
    if (at >= r.first && at + bytes <= r.second) return true;
  return false;
}
#endif
