"""OWLer-py: a Python port of StormCrawler (as used by OWLer) for Apache Storm multilang topologies."""

__version__ = "0.1.0"
