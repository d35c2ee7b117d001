// Stand-in for Vitis HLS's hls_stream.h, for C-simulation with g++ where Vitis is not installed.
// hetero_dse's csim puts this directory on the include path only when $XILINX_HLS/include is absent.
// Semantics follow Vitis C-simulation: an unbounded FIFO, processes of a DATAFLOW region run one
// after the other, and reading an empty stream is an error.
#ifndef HETERO_DSE_HLS_STREAM_H
#define HETERO_DSE_HLS_STREAM_H

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>

namespace hls {

template <typename T, int DEPTH = 2>
class stream {
 public:
  stream() = default;
  explicit stream(const char *name) : name_(name) {}
  stream(const stream &) = delete;
  stream &operator=(const stream &) = delete;

  bool empty() const { return fifo_.empty(); }
  bool full() const { return false; }
  std::size_t size() const { return fifo_.size(); }
  void write(const T &value) { fifo_.push_back(value); }
  void operator<<(const T &value) { write(value); }
  T read() {
    if (fifo_.empty()) {
      std::fprintf(stderr, "hls::stream '%s' read while empty: the producer wrote fewer values\n", name_.c_str());
      std::abort();
    }
    T value = fifo_.front();
    fifo_.pop_front();
    return value;
  }
  void operator>>(T &value) { value = read(); }

 private:
  std::deque<T> fifo_;
  std::string name_ = "stream";
};

}  // namespace hls

#endif
