"""Thin streamparse spouts over ``owler``."""
