"""The hardware a design runs on: FPGA boards (``board.py``, from the YAML files in ``boards/``), GPUs
(``gpus.py``: the devices a GPU schedule is generated and estimated for) and the host CPU (``host.py``: its
physical cores, which TVM and torch are given)."""
