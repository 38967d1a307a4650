"""Running the crawler: the ``owler`` command line and the processes it starts.

- :mod:`owler.run.cli`: ``owler inject|run|status|check-url|check-robots|services|cluster``;
- :mod:`owler.run.runner`: ``owler run``, a topology on Storm in local mode;
- :mod:`owler.run.cluster`: ``owler cluster``, a single-node Storm cluster on loopback;
- :mod:`owler.run.services`: ``owler services``, a single-node OpenSearch;
- :mod:`owler.run.procs`: pid files, process groups and ports, shared by the two above;
- :mod:`owler.run.report`: what ``owler status`` reads besides the frontier (the metrics index).

Nothing under :mod:`owler` imports this package: it is the top of the library.
"""
