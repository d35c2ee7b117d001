// Test double of xrt/xrt_kernel.h: see xrt_device.h. A run takes each buffer object's card copy as it starts and
// passes it (typed as the kernel's parameter asks), and each scalar as it is, to the function HDSE_XRT_KERNEL names
// when the host waits for the run: the network kernel's and the pipeline's arguments alike.
#ifndef HDSE_STANDIN_XRT_KERNEL_H
#define HDSE_STANDIN_XRT_KERNEL_H

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "xrt_device.h"

// Where the project's kernels are joined by streams (xrt_links.h, as connectivity.cfg's stream_connect joins them),
// a kernel is opened by one of their names (anything else throws), and a run set up argument by argument calls the
// kernel's model with the streams between the kernels, which the host never sees.
#if __has_include("xrt_links.h")
#include "xrt_links.h"
#define HDSE_XRT_LINKED 1
#endif

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
// the card's memory of a run's buffers as the run starts (a buffer passed to several arguments once): the kernel
// reads what the host synced before it started it, not after; the run's writes reach the buffers when it ends
class snapshot {
 public:
  void take(bo &b) {
    char *card = static_cast<char *>(b.card_memory());
    if (!copies_.count(card)) copies_[card].assign(card, card + b.size());
  }
  template <typename T>
  void take(const T &) {}
  memory pass(bo &b) { return memory{copies_.at(static_cast<char *>(b.card_memory())).data()}; }
  int pass(int value) { return value; }
  void give_back() {
    for (auto &[card, copy] : copies_) std::memcpy(card, copy.data(), copy.size());
  }

 private:
  std::map<char *, std::vector<char>> copies_;
};
}  // namespace detail

// Where the project gives its compute units' memory banks (xrt_banks.h, as connectivity.cfg connects them), a kernel
// is opened by the name XRT takes (KERNEL, or KERNEL:{INSTANCE} for one compute unit; anything else throws as XRT's
// "No compute units matching" does), group_id is that unit's argument's bank, and a run throws where a buffer's bank
// is not the one its argument is connected to. Without it (the pipeline's project), any name, and an argument's
// group is its index.
#if __has_include("xrt_banks.h")
#include "xrt_banks.h"
#define HDSE_XRT_CHECKED 1
#endif

class kernel {
 public:
  kernel(const device &, const uuid &, const std::string &name) : unit_(instance(name)) {}
  int unit() const { return unit_; }
#ifdef HDSE_XRT_CHECKED
  int group_id(int argument) const { return HDSE_XRT_BANK[unit_][argument]; }
#else
  int group_id(int argument) const { return argument; }
#endif
  template <typename... Args>
  xrt::run operator()(Args &&...args) {
    int position = 0;
    (check(args, position++), ...);
    auto start = std::make_shared<detail::snapshot>();
    (start->take(args), ...);
    return xrt::run([=]() mutable {
      HDSE_XRT_KERNEL(start->pass(args)...);
      start->give_back();
    });
  }

 private:
  int unit_;

  static int instance(const std::string &name) {
#if defined(HDSE_XRT_LINKED)
    for (int k = 0; k < HDSE_XRT_KERNEL_COUNT; ++k)
      if (name == HDSE_XRT_KERNEL_NAMES[k] || name == std::string(HDSE_XRT_KERNEL_NAMES[k]) + ":{" +
                                                       HDSE_XRT_KERNEL_NAMES[k] + "_1}")
        return k;
    throw std::invalid_argument("No compute units matching '" + name + "'");
#elif defined(HDSE_XRT_CHECKED)
    const std::string top = HDSE_XRT_TOP, unit = top + ":{" + top + "_";
    if (name == top) return 0;
    if (name.compare(0, unit.size(), unit) == 0 && name.back() == '}') {
      const int u = std::atoi(name.substr(unit.size(), name.size() - unit.size() - 1).c_str());
      if (u >= 1 && u <= HDSE_XRT_UNITS) return u - 1;
    }
    throw std::invalid_argument("No compute units matching '" + name + "'");
#else
    (void)name;
    return 0;
#endif
  }
  void check(const bo &b, int position) const {
#ifdef HDSE_XRT_CHECKED
    if (b.group() != group_id(position))
      throw std::runtime_error("argument " + std::to_string(position) + ": a buffer in bank " +
                               std::to_string(b.group()) + ", connected to bank " +
                               std::to_string(group_id(position)));
#else
    (void)b;
    (void)position;
#endif
  }
  template <typename T>
  void check(const T &, int) const {}
};

#ifdef HDSE_XRT_LINKED
namespace detail {
// a run's arguments as the host sets them, by index; the kernel's model asks for each by index (an argument the
// host did not set throws, where XRT would start the kernel with whatever the register held)
struct arguments {
  int unit = 0;
  std::map<int, bo> buffers;
  std::map<int, int> scalars;
  snapshot *start = nullptr;
  memory buffer(int index) {
    auto it = buffers.find(index);
    if (it == buffers.end()) throw std::runtime_error("argument " + std::to_string(index) + " was not set");
    return start->pass(it->second);
  }
  int scalar(int index) const {
    auto it = scalars.find(index);
    if (it == scalars.end()) throw std::runtime_error("argument " + std::to_string(index) + " was not set");
    return it->second;
  }
};
}  // namespace detail

inline run::run(const kernel &k) : args_(std::make_shared<detail::arguments>()) { args_->unit = k.unit(); }
inline void run::set_arg(int index, bo &buffer) { args_->buffers.insert_or_assign(index, buffer); }
inline void run::set_arg(int index, int value) { args_->scalars[index] = value; }
// the buffers' card copies as the run starts, as operator() takes them; the kernel's model runs at wait
inline void run::start() {
  auto args = args_;
  auto start = std::make_shared<detail::snapshot>();
  for (auto &[index, buffer] : args->buffers) start->take(buffer);
  work_ = std::make_shared<std::function<void()>>([args, start]() {
    args->start = start.get();
    hdse_xrt_invoke(args->unit, *args);
    start->give_back();
  });
}
#endif

}  // namespace xrt

#endif
