"""The WARC/1.1 record format both pipelines share: :mod:`.serialize` makes records (headers,
HTTP blocks, digests, one gzip member each), :mod:`.reader` reads WARC files back as records that
keep their exact input bytes. Imports nothing else of :mod:`owler.warc`."""
