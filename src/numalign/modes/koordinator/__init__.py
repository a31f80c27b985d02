"""Koordinator's NUMA topology scheduling as an engine mode: its CPU, NUMA-memory and device
managers, its merge rules, and its scheduler plugin (filter, NUMA score, joint allocation)."""
