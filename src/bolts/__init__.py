"""Thin streamparse bolts: decode a tuple, call ``owler``, emit. The logic lives in ``src/owler``."""
