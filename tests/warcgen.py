"""WARC files made by the tests themselves (the outside cases that cannot be copied into the project
are modelled here): per-record gzip, one gzip stream for a whole file, uncompressed, truncated,
WARC/0.18 heads, wrong digests, brotli and chunked responses, HTML pages with links."""

from __future__ import annotations

import base64
import gzip
import hashlib
import uuid
import zlib


def sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def http_response(body: bytes, status: str = "200 OK", headers: list[tuple[str, str]] | None = None,
                  chunked: bool = False) -> bytes:
    hdrs = list(headers or [("Content-Type", "text/html; charset=utf-8")])
    if chunked:
        hdrs.append(("Transfer-Encoding", "chunked"))
        parts = [body[i:i + 100] for i in range(0, len(body), 100)]
        body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    else:
        hdrs.append(("Content-Length", str(len(body))))
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n"
    return head.encode("latin-1") + body


def record(wtype: str, uri: str | None, block: bytes, *, version: str = "WARC/1.1",
           date: str = "2024-05-01T12:00:00Z", content_type: str | None = None,
           digests: bool = True, bad_payload_digest: bool = False) -> bytes:
    ctype = content_type or {
        "response": "application/http; msgtype=response",
        "request": "application/http; msgtype=request",
        "warcinfo": "application/warc-fields",
        "metadata": "application/warc-fields"}.get(wtype, "application/octet-stream")
    head = [version, f"WARC-Type: {wtype}", f"WARC-Record-ID: <urn:uuid:{uuid.uuid4()}>",
            f"WARC-Date: {date}"]
    if uri:
        head.append(f"WARC-Target-URI: {uri}")
    head.append(f"Content-Type: {ctype}")
    if digests:
        head.append(f"WARC-Block-Digest: {sha1(block)}")
        if wtype == "response" and b"\r\n\r\n" in block:
            payload = block.split(b"\r\n\r\n", 1)[1]
            head.append(f"WARC-Payload-Digest: {sha1(payload + (b'x' if bad_payload_digest else b''))}")
    head.append(f"Content-Length: {len(block)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + block + b"\r\n\r\n"


def page(title: str, links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{u}">link {i}</a> ' for i, u in enumerate(links))
    return (f"<html><head><title>{title}</title></head><body><p>{title}</p>{anchors}"
            "</body></html>").encode()


def site_records(host: str, n: int, version: str = "WARC/1.1") -> list[bytes]:
    """warcinfo + per page a request and a response linking to two other pages and one external."""
    out = [record("warcinfo", None, b"software: warcgen\r\n", version=version)]
    for i in range(n):
        url = f"http://{host}/page{i}.html"
        links = [f"/page{(i + 1) % n}.html", f"http://{host}/page{(i + 2) % n}.html",
                 f"http://external-{i}.example.org/"]
        out.append(record("request", url, f"GET /page{i}.html HTTP/1.1\r\nHost: {host}\r\n\r\n"
                          .encode(), version=version))
        out.append(record("response", url, http_response(page(f"{host} page {i}", links)),
                          version=version))
    return out


def exchanges(host: str, n: int, body, name: str = "page{i}.html",
              content_type: str = "text/html; charset=utf-8", software: str = "warcgen"
              ) -> list[bytes]:
    """warcinfo + per resource ``i`` a request and a response whose body is ``body(i)``."""
    out = [record("warcinfo", None, f"software: {software}\r\n".encode())]
    for i in range(n):
        path = "/" + name.format(i=i)
        url = f"http://{host}{path}"
        out.append(record("request", url, f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"
                          .encode()))
        out.append(record("response", url, http_response(
            body(i), headers=[("Content-Type", content_type)])))
    return out


def per_record_gzip(records: list[bytes]) -> bytes:
    return b"".join(gzip.compress(r, compresslevel=6) for r in records)


def one_gzip_stream(records: list[bytes]) -> bytes:
    return gzip.compress(b"".join(records), compresslevel=6)


def members(data: bytes) -> list[bytes]:
    """The gzip members of ``data`` as their compressed bytes."""
    out = []
    pos = 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        d.decompress(data[pos:])
        end = len(data) - len(d.unused_data)
        out.append(data[pos:end])
        pos = end
    return out
