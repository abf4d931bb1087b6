"""PySpark rollups of exported metric snapshots and ISR state-change events (``actorlog rollup``).

The package is the only code that imports ``pyspark`` (``schema`` imports it lazily so that the
snapshot writer, which shares the file schema, never starts a JVM). Modules:

* ``schema``: the snapshot and state-change file schemas (pyarrow and Spark);
* ``metrics``: which catalogued metrics the rollup reads (names only from ``ops/metric_catalog.py``);
* ``session``: building the SparkSession without hard-coding the master;
* ``transforms``: pure ``DataFrame -> DataFrame`` functions over the scrapes;
* ``isr_history``: pure ``DataFrame -> DataFrame`` functions over the state-change events (the exact
  ISR history: intervals, totals, incidents, propagation delays);
* ``report``: the printed summary, the PNG plots and the HTML page, from small collected tables;
* ``job``: the thin I/O ``main``: read Parquet, call the transforms, write tables and the report.
"""
