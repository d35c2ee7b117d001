// TVM's two parallel entry points (the context functions every compiled CPU module calls for a parallel loop)
// run on the OpenMP runtime this library is linked against. Loaded into a process after torch, that is
// torch's own libgomp: our kernels and torch's ops then share one team of threads instead of two pools that
// spin against each other on the same cores (gpu_cpu/one_pool.py). Built with -fno-exceptions: nothing here
// throws, and the library then needs no C++ runtime of its own.
#include <omp.h>
#include <atomic>
#include <cstdint>

extern "C" {

// the layout of TVM's TVMParallelGroupEnv (tvm/runtime/c_backend_api.h)
struct ParallelGroupEnv {
  void* sync_handle;
  int32_t num_task;
};
typedef int (*ParallelLambda)(int task_id, ParallelGroupEnv* penv, void* cdata);
// tvm-ffi's thread-local error slot: a worker's error is moved out of its thread and raised in the caller's
// (TVMFFIErrorMoveFromRaised, TVMFFIErrorSetRaised), as TVM's own pool does
typedef void (*ErrorMove)(void** error);
typedef void (*ErrorSet)(void* error);

static std::atomic<long> launches{0};
static std::atomic<int> team{0};
static ErrorMove error_move = nullptr;
static ErrorSet error_set = nullptr;

// the team a loop forks when TVM asks for "all threads" (num_task 0): torch's thread count, set from Python,
// so that a kernel called from a thread where torch never set its count still uses torch's
void hdse_parallel_configure(int threads, ErrorMove move, ErrorSet set) {
  team.store(threads);
  error_move = move;
  error_set = set;
}

int hdse_parallel_launch(ParallelLambda lambda, void* cdata, int num_task) {
  launches.fetch_add(1, std::memory_order_relaxed);
  int status = 0;
  void* error = nullptr;
  int threads = num_task > 0 ? num_task : (team.load() > 0 ? team.load() : omp_get_max_threads());
#pragma omp parallel num_threads(threads)
  {
    // the team OpenMP gave, which may be smaller than asked (nested, a thread limit): the lambda splits its
    // loop by num_task, so it must be the team's size
    ParallelGroupEnv env = {nullptr, omp_get_num_threads()};
    int mine = lambda(omp_get_thread_num(), &env, cdata);
    if (mine != 0) {
#pragma omp critical(hdse_parallel_error)
      if (status == 0) {
        status = mine;
        if (omp_get_thread_num() != 0 && error_move != nullptr) error_move(&error);
      }
    }
  }
  if (error != nullptr && error_set != nullptr) error_set(error);
  return status;
}

int hdse_parallel_barrier(int, ParallelGroupEnv*) {
#pragma omp barrier
  return 0;
}

long hdse_parallel_launches() { return launches.load(); }

// the address of omp_get_max_threads as this library resolved it: which OpenMP runtime it is bound to
void* hdse_openmp_symbol() { return reinterpret_cast<void*>(&omp_get_max_threads); }

}  // extern "C"
