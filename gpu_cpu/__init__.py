"""TVM code generation and measurement for CPU (llvm) and GPU (cuda)."""

from gpu_cpu.host import use_host_cores

# before any TVM runtime starts in this process or a worker: every parallel loop on every physical core
use_host_cores()
