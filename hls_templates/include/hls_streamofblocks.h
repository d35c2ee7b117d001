// Stand-in for Vitis HLS's hls_streamofblocks.h (UG1399, "Specifying Arrays as Stream-of-Blocks"), for
// C-simulation with g++ where Vitis is not installed. A write_lock hands the producer a fresh block that
// joins the stream when the lock goes out of scope; a read_lock hands the consumer the oldest block and
// frees it when the lock goes out of scope. As in Vitis C-simulation, the stream is unbounded and the
// processes of a DATAFLOW region run one after the other.
//
// Stricter than the real header, so that a pass means something:
//   - a new block is filled with a poison pattern (0xFF bytes: NaN for floats, -1 for integers) where the
//     real header leaves it uninitialised, so an element read before it was written shows in the output;
//   - acquiring a second lock of the same kind on one stream before releasing the first aborts, as the
//     real header does ("acquiring ... more than once before releasing", a UG1399 limitation);
//   - a consumer that takes more blocks than its producer made aborts, and so does a stream left holding blocks
//     (on the device its producer would stall the region).
#ifndef HETERO_DSE_HLS_STREAMOFBLOCKS_H
#define HETERO_DSE_HLS_STREAMOFBLOCKS_H

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <new>

namespace hls {

template <typename T>
struct block_holder {
  T data;
};

// Blocks of hls::vector are aligned to their size, more than C++14's new guarantees: allocate them aligned.
template <typename T>
struct aligned_delete {
  void operator()(T *p) const {
    p->~T();
    std::free(p);
  }
};
template <typename T>
using aligned_ptr = std::unique_ptr<T, aligned_delete<T>>;
template <typename T>
aligned_ptr<T> make_aligned() {
  void *p = nullptr;
  const std::size_t align = alignof(T) < sizeof(void *) ? sizeof(void *) : alignof(T);
  if (posix_memalign(&p, align, sizeof(T)) != 0) std::abort();
  return aligned_ptr<T>(new (p) T);
}

// The depth-independent part of a stream of blocks, so that locks work with any depth.
template <typename T>
class stream_of_blocks_base {
 public:
  virtual ~stream_of_blocks_base() {
    // on the device a producer that makes more blocks than its consumer takes stalls the DATAFLOW region forever
    if (!blocks_.empty()) fail("blocks left in the stream: its producer made more than its consumer took");
  }
  bool empty() const { return blocks_.empty(); }
  bool full() const { return false; }
  std::size_t size() const { return blocks_.size(); }

  block_holder<T> *acquire_write() {
    if (writing_) fail("acquiring a write_lock more than once before releasing it");
    writing_ = true;
    pending_ = make_aligned<block_holder<T>>();
    std::memset(static_cast<void *>(&pending_->data), 0xFF, sizeof(T));  // poison, see above
    return pending_.get();
  }
  void release_write() {
    blocks_.push_back(std::move(pending_));
    writing_ = false;
  }
  block_holder<T> *acquire_read() {
    if (reading_) fail("acquiring a read_lock more than once before releasing it");
    if (blocks_.empty()) fail("read while empty: the consumer takes more blocks than were made");
    reading_ = true;
    return blocks_.front().get();
  }
  void release_read() {
    blocks_.pop_front();
    reading_ = false;
  }

 private:
  [[noreturn]] static void fail(const char *what) {
    std::fprintf(stderr, "stream_of_blocks: %s\n", what);
    std::abort();
  }
  std::deque<aligned_ptr<block_holder<T>>> blocks_;
  aligned_ptr<block_holder<T>> pending_;
  bool writing_ = false;
  bool reading_ = false;
};

template <typename T, int DEPTH = 2>
class stream_of_blocks : public stream_of_blocks_base<T> {
  static_assert(DEPTH >= 1, "a stream of blocks holds at least one block");

 public:
  stream_of_blocks() = default;
  stream_of_blocks(const stream_of_blocks &) = delete;
  stream_of_blocks &operator=(const stream_of_blocks &) = delete;
};

template <typename T>
class write_lock {
 public:
  explicit write_lock(stream_of_blocks_base<T> &s) : stream_(s), block_(s.acquire_write()) {}
  ~write_lock() { stream_.release_write(); }
  write_lock(const write_lock &) = delete;
  write_lock &operator=(const write_lock &) = delete;
  operator T &() { return block_->data; }

 private:
  stream_of_blocks_base<T> &stream_;
  block_holder<T> *block_;
};

template <typename T>
class read_lock {
 public:
  explicit read_lock(stream_of_blocks_base<T> &s) : stream_(s), block_(s.acquire_read()) {}
  ~read_lock() { stream_.release_read(); }
  read_lock(const read_lock &) = delete;
  read_lock &operator=(const read_lock &) = delete;
  operator T &() { return block_->data; }

 private:
  stream_of_blocks_base<T> &stream_;
  block_holder<T> *block_;
};

}  // namespace hls

#endif
