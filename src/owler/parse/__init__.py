"""Parsing fetched content: HTML (:mod:`owler.parse.html`) and charset detection
(:mod:`owler.parse.charset`)."""

from owler.parse.html import Outlink, ParseError, ParseResult, is_html, parse_html

__all__ = ["Outlink", "ParseError", "ParseResult", "is_html", "parse_html"]
