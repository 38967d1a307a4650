"""WARC2WARC: WARC files from S3 (or a folder) → parsed → outlinks to the frontier; every record
archived unchanged; nothing is fetched.

The WARCSpout copies every record, its exact bytes, into its own output WARC files and emits
the HTTP responses, once their copy is recorded, to the parser
(``owler.warc.warc2warc.copying_feed``): a record's bytes cross the worker JVM at most once, and a
request or metadata record never. The
parser gives each response's status (the record's URL goes to the frontier as FETCHED with its
WARC-Date, or REDIRECTION / FETCH_ERROR / ERROR) and ONE tuple with its outlinks, those the URL
filters and the blacklist let through (in the parser's process, as the explorative crawl's parser
does), to the status updater.

Run: ``owler run warc2warc -o warc2warc.input=s3://bucket/prefix`` (local mode), ``sparse run -n
warc2warc`` or ``sparse submit -n warc2warc``.
"""

from functools import partial

from streamparse import Grouping, Topology

from bolts.status_updater import StatusUpdaterBolt
from bolts.warc_parser import WARCParserBolt
from owler import conf as C
from owler.conf import parallelism, parser_grouping, topology_conf
from owler.constants import OUTLINKS_STREAM, STATUS_STREAM, TICK_FREQ_KEY, WARC_ENABLED_KEY
from spouts.warc import WARCSpout

TICK = {TICK_FREQ_KEY: 1}


#: the crawler conf the topology is built with; par(name): the tasks of a component
#: (parallelism.<name>, 1)
CONFIG = topology_conf()
par = partial(parallelism, CONFIG)
#: responses to the parser (parser.grouping): grouped on their queue's key, so that one parser
#: task sees all of a host's pages and their near-duplicates (owler/parse/simhash.py), or in the
#: worker
PAGES = Grouping.fields("key") if parser_grouping(CONFIG) == "key" else Grouping.LOCAL_OR_SHUFFLE


class Warc2Warc(Topology):
    config = CONFIG

    # the spout bounds what is in flight itself (warc2warc.max.in.flight, default 2000: the
    # frontier spouts' topology.max.spout.pending of 2000 would throttle this pipeline)
    spout = WARCSpout.spec(name="spout", par=par("spout"),
                           config={"topology.max.spout.pending": 1000000})
    parser = WARCParserBolt.spec(name="parser", inputs={spout: PAGES}, par=par("parser"))
    status = StatusUpdaterBolt.spec(
        name="status", par=par("status"), config=TICK,
        inputs={parser[STATUS_STREAM]: Grouping.fields("url"),
                parser[OUTLINKS_STREAM]: Grouping.SHUFFLE})

    @staticmethod
    def check_conf(conf: dict) -> None:
        """Raise ConfError for bad progress or S3 streaming keys before Storm starts (``owler
        run`` and ``owler cluster submit`` call it)."""
        from owler.warc.storage.s3_stream import check_conf as check_warc_conf
        from owler.warc.warc2warc.progress import progress_backend

        if not C.get_bool(conf, WARC_ENABLED_KEY, True):
            raise C.ConfError(f"{WARC_ENABLED_KEY}: warc2warc writes WARC files, it cannot run "
                              "with WARC output off")
        progress_backend(conf)
        check_warc_conf(conf, dedup=False)
