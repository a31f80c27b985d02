"""``numalign sweep``: grids of simulations (clusters, sizes, Topology Manager policies and
scopes, scheduler profiles, workloads, seeds) on Dask distributed, resumable.

* :mod:`~numalign.sim.sweep.spec` - the sweep file (axes, pod limit, report layout) and caps;
* :mod:`~numalign.sim.sweep.grid` - cells, their parameters and ids, ``--only``;
* :mod:`~numalign.sim.sweep.checks` - checks that need the library, before any cell runs;
* :mod:`~numalign.sim.sweep.cell` - one cell on a worker (the simulate run, per-worker cache);
* :mod:`~numalign.sim.sweep.executor` - Dask: LocalCluster or an address, retries, events
  (the only module that imports Dask);
* :mod:`~numalign.sim.sweep.store` - the output directory: cell files, sweep.json, sweep.csv;
* :mod:`~numalign.sim.sweep.metrics`, :mod:`~numalign.sim.sweep.report` - the table's
  metrics and report.html;
* :mod:`~numalign.sim.sweep.progress`, :mod:`~numalign.sim.sweep.command` - the command.

See ``docs/sweeps.md``. Importing this package imports no Dask.
"""
