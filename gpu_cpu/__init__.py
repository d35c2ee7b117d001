"""TVM code generation and measurement for CPU (llvm) and GPU (cuda).

Importing it changes nothing in the process: TVM's thread pool is sized at the host's physical cores when
a measurer or a pipeline is made (``hetero_dse.hardware.host.use_host_cores``), before any TVM runtime starts.
"""
