"""Where WARC files go, for the crawl's archive and warc2warc's copy alike: :mod:`.files`
(WARCWriter: rotated per-record-gzip files, their names, crash recovery), :mod:`.s3_upload`
(finished files to S3, and the choice of a writer task's output), :mod:`.s3_stream` (files written
straight to S3 as multipart uploads), :mod:`.s3` (the S3 client: listing, reads, verified uploads).
Imports only :mod:`owler.warc.format` of the rest of :mod:`owler.warc`."""
