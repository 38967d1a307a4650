"""What every spout and bolt task shares, on the Python side of Storm's multilang protocol.

- :mod:`owler.task.component`: :class:`~owler.task.component.OwlerComponent`, the mixin of every
  component (configuration, counters and stats files, metrics, errors shown in the Storm UI, a
  clean shutdown) and :class:`~owler.task.component.StatusEmitter` for the components that emit
  statuses and outlinks;
- :mod:`owler.task.batch`: :class:`~owler.task.batch.CommitBatch`, tuples acked only after the
  write they asked for is durable;
- :mod:`owler.task.shard`: :class:`~owler.task.shard.Shard`, which task of a component owns a
  queue or a file;
- :mod:`owler.task.metrics`: counters and gauges to StormCrawler's metrics index.

No streamparse import here: the adapters in ``src/spouts`` and ``src/bolts`` mix these into
streamparse's classes, and everything here is tested without Storm.
"""
