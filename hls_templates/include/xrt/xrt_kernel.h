// Test double of xrt/xrt_kernel.h: see xrt_device.h. Only the network kernel's arguments (its kernel.h, included
// before this header: table, first, count, the arena three times, weights, parameters); a buffer object is
// passed as its host memory.
#ifndef HDSE_STANDIN_XRT_KERNEL_H
#define HDSE_STANDIN_XRT_KERNEL_H

#include "xrt_device.h"

namespace xrt {

class kernel {
 public:
  kernel(const device &, const uuid &, const std::string &) {}
  int group_id(int argument) const { return argument; }
  xrt::run operator()(bo &table, int first, int count, bo &act_in, bo &act_res, bo &act_out, bo &wgt, bo &params) {
    HDSE_XRT_KERNEL(table.map<const int *>(), first, count, act_in.map<const word_t *>(),
                    act_res.map<const word_t *>(), act_out.map<word_t *>(), wgt.map<const wword_t *>(),
                    params.map<const pword_t *>());
    return xrt::run();
  }
};

}  // namespace xrt

#endif
