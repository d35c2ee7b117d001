"""The evaluators of the one search loop (``hetero_dse.explore.loop``): rows of a space in, an ``Evaluation`` out
(each row's objective, why a row failed, the evaluator's figures).

* :mod:`.model` — the FPGA analytical model (milliseconds for thousands of designs);
* :mod:`.measured` — TVM schedules built and timed on this CPU or a GPU (seconds a trial), and the log of
  every trial a measured search keeps;
* :mod:`.estimate` — the GPU roofline of a named device where there is no GPU to time on: a model, never
  passed off as a measurement;
* :mod:`.cached` — the history database in front of any of them: what it holds is answered, every new result
  written the moment it exists.

Targets choose and assemble them; the search loop only sees the ``Evaluator`` protocol.
"""
