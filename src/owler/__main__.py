"""``python -m owler …``: the ``owler`` command (:mod:`owler.run.cli`)."""

import sys

from owler.run.cli import main

sys.exit(main())
