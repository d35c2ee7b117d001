// Test double of xrt/xrt_kernel.h: see xrt_device.h. A run passes each buffer object as its host memory (typed as
// the kernel's parameter asks) and each scalar as it is, to the function HDSE_XRT_KERNEL names: the network
// kernel's and the pipeline's arguments alike.
#ifndef HDSE_STANDIN_XRT_KERNEL_H
#define HDSE_STANDIN_XRT_KERNEL_H

#include "xrt_device.h"

namespace xrt {

namespace detail {
// a buffer object's memory, converted to whatever pointer type the kernel's parameter is
struct memory {
  void *data;
  template <typename T>
  operator T *() const { return static_cast<T *>(data); }
  // or a port class over it (the network kernel's hls::burst_maxi<word_t>), made from the pointer
  template <template <typename> class Port, typename T>
  operator Port<T>() const { return Port<T>(static_cast<T *>(data)); }
};
inline memory pass(bo &b) { return memory{b.map<void *>()}; }
inline int pass(int value) { return value; }
}  // namespace detail

class kernel {
 public:
  kernel(const device &, const uuid &, const std::string &) {}
  int group_id(int argument) const { return argument; }
  template <typename... Args>
  xrt::run operator()(Args &&...args) {
    HDSE_XRT_KERNEL(detail::pass(args)...);
    return xrt::run();
  }
};

}  // namespace xrt

#endif
