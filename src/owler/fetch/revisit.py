"""Re-visits: conditional requests, and what a re-fetched page needs archived again.

A URL fetched before comes back from the frontier with what its last fetch left in its metadata
(when ``metadata.persist`` keeps it, as the default configuration does):

- the server's validators, ``<prefix>etag`` and ``<prefix>last-modified`` (``protocol.md.prefix``,
  ``protocol.`` by default; StormCrawler's ``protocol.etag``), and StormCrawler's
  ``last-modified`` (the adaptive scheduler's change date with
  ``scheduler.adaptive.setLastModified``);
- the last full capture: ``capture.digest`` (its WARC-Payload-Digest) and ``capture.date`` (its
  WARC-Date).

:func:`conditional_headers` turns the validators into ``If-None-Match`` / ``If-Modified-Since``
(RFC 9110 §13.1). After the answer:

- a ``304 Not Modified`` to a conditional request is a FETCHED page whose content is the last
  capture's: it is archived as a ``revisit`` record with profile ``server-not-modified``
  (WARC 1.1 §6.7.3) that refers to the capture (:func:`note_not_modified`);
- a ``304`` to a request that was not conditional has no content to go by: FETCH_ERROR
  ``error.cause=unsolicited_304`` (a page whose content could not be read is never FETCHED);
- a ``200`` whose payload digest is the last capture's is archived as a ``revisit`` record with
  profile ``identical-payload-digest`` (§6.7.2, Heritrix's duplicate reduction) when
  ``warc.revisit.identical`` is true (the default); any other ``200`` is a new capture
  (:func:`note_capture`).

The validators of the answer replace the stored ones (a server that stops sending an ETag must
not be asked with the old one). Nothing here is transient except the ``_raw.*`` keys that tell
the WARC writer what to write (:mod:`owler.wire`).

Config keys: ``http.conditional.requests`` (true), ``warc.revisit.identical`` (true),
``protocol.md.prefix``.
"""

from __future__ import annotations

from typing import Any, Mapping

from owler import conf as C
from owler import wire
from owler.constants import CAPTURE_DATE, CAPTURE_DIGEST, LAST_MODIFIED, MD_PREFIX_KEY
from owler.metadata import first

NOT_MODIFIED = "server-not-modified"
IDENTICAL = "identical-payload-digest"
ETAG = "etag"
SERVER_LAST_MODIFIED = "last-modified"


def _one_line(value: str | None) -> str | None:
    """``value`` stripped, when it can go in a header line (not empty, no CR or LF)."""
    if value:
        value = str(value).strip()
        if value and "\r" not in value and "\n" not in value:
            return value
    return None


class Revisits:
    """The re-visit rules of the fetch engine (module docstring)."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        conf = conf or {}
        self.conditional = C.get_bool(conf, "http.conditional.requests", True)
        self.identical = C.get_bool(conf, "warc.revisit.identical", True)
        prefix = C.get_str(conf, MD_PREFIX_KEY, "protocol.") or ""
        self.etag_key = prefix + ETAG
        self.last_modified_key = prefix + SERVER_LAST_MODIFIED

    def conditional_headers(self, md: Mapping[str, list[str]]) -> dict[str, str] | None:
        """The conditional request headers for a URL with metadata ``md``, None when there are
        none (never fetched, no validators, or ``http.conditional.requests`` false)."""
        if not self.conditional:
            return None
        headers = {}
        etag = _one_line(first(md, self.etag_key))
        if etag:
            headers["If-None-Match"] = etag
        since = (_one_line(first(md, LAST_MODIFIED))
                 or _one_line(first(md, self.last_modified_key)))
        if since:
            headers["If-Modified-Since"] = since
        return headers or None

    def note_validators(self, md: dict, header, keep_missing: bool = False) -> None:
        """Keep the answer's ``ETag`` and ``Last-Modified`` (``header(name)`` reads the
        response); stored ones the answer no longer has are dropped, unless ``keep_missing``."""
        for key, name in ((self.etag_key, "ETag"), (self.last_modified_key, "Last-Modified")):
            value = _one_line(header(name))
            if value:
                md[key] = [value]
            elif not keep_missing:
                md.pop(key, None)

    def forget_validators(self, md: dict) -> None:
        """Drop the stored ``ETag`` and ``Last-Modified``: the next request is not conditional
        (a fetch whose content was not archived must not be the base of a 304)."""
        md.pop(self.etag_key, None)
        md.pop(self.last_modified_key, None)

    def note_not_modified(self, md: dict, header) -> None:
        """A 304 to a conditional request: archive a ``server-not-modified`` revisit; validators
        the 304 carries replace the stored ones (RFC 9110 §15.4.5: it sends those a 200 would),
        the others stay."""
        self.note_validators(md, header, keep_missing=True)
        md[wire.RAW_REVISIT] = [NOT_MODIFIED]

    def note_capture(self, md: dict, content: bytes, fetch_time: float) -> None:
        """A 200: its payload digest; a revisit of the last capture when the payload is the same
        (``warc.revisit.identical``), else this fetch is the new capture."""
        digest = wire.payload_digest(content)
        md[wire.RAW_PAYLOAD_DIGEST] = [digest]
        if self.identical and first(md, CAPTURE_DIGEST) == digest and first(md, CAPTURE_DATE):
            md[wire.RAW_REVISIT] = [IDENTICAL]
            return
        md[CAPTURE_DIGEST] = [digest]
        md[CAPTURE_DATE] = [wire.warc_date(fetch_time)]
