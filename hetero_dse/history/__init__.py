"""The history database: every evaluated point of every workload, so that nothing is measured twice."""

from hetero_dse.history.records import Record, Workload, point_key, workload_spec
from hetero_dse.history.store import HistoryDB, WorkloadHistory, default_url

__all__ = ["HistoryDB", "Record", "Workload", "WorkloadHistory", "default_url", "point_key", "workload_spec"]
