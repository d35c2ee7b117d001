"""TVM code generation and measurement for CPU (llvm) and GPU (cuda)."""
