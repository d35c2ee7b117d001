// Stand-in for Vitis HLS's hls_streamofblocks.h (UG1399, "Specifying Arrays as Stream-of-Blocks"), for
// C-simulation with g++ where Vitis is not installed. A write_lock hands the producer a fresh block that
// joins the stream when the lock goes out of scope; a read_lock hands the consumer the oldest block and
// frees it when the lock goes out of scope. As in Vitis C-simulation, the stream is unbounded and the
// processes of a DATAFLOW region run one after the other, so a consumer that takes more blocks than its
// producer made is a bug in the design: it aborts with a message.
#ifndef HETERO_DSE_HLS_STREAMOFBLOCKS_H
#define HETERO_DSE_HLS_STREAMOFBLOCKS_H

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>

namespace hls {

template <typename T>
struct block_holder {
  T data;
};

// The depth-independent part of a stream of blocks, so that locks work with any depth.
template <typename T>
class stream_of_blocks_base {
 public:
  virtual ~stream_of_blocks_base() = default;
  bool empty() const { return blocks_.empty(); }
  bool full() const { return false; }
  std::size_t size() const { return blocks_.size(); }

  block_holder<T> *acquire_write() {
    pending_.emplace_back(new block_holder<T>());
    return pending_.back().get();
  }
  void release_write() {
    blocks_.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  block_holder<T> *acquire_read() {
    if (blocks_.empty()) {
      std::fprintf(stderr, "stream_of_blocks read while empty: the consumer takes more blocks than were made\n");
      std::abort();
    }
    return blocks_.front().get();
  }
  void release_read() { blocks_.pop_front(); }

 private:
  std::deque<std::unique_ptr<block_holder<T>>> blocks_;
  std::deque<std::unique_ptr<block_holder<T>>> pending_;
};

template <typename T, int DEPTH = 2>
class stream_of_blocks : public stream_of_blocks_base<T> {
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
