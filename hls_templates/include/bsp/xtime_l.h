// Test double of the standalone BSP's xtime_l.h: the global timer as the host's steady clock.
#ifndef HDSE_STANDIN_XTIME_L_H
#define HDSE_STANDIN_XTIME_L_H
#include <chrono>
#include "xil_types.h"
typedef u64 XTime;
#define COUNTS_PER_SECOND 1000000000ULL
inline void XTime_GetTime(XTime *t) {
  *t = (XTime)std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch()).count();
}
#endif
