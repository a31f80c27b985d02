"""Volcano's ``numa-aware`` plugin as an engine mode: its predicate, node selection, NUMA score
and Job expansion."""
