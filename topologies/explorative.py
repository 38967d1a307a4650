"""The explorative crawl: frontier → partitioner → fetcher → parser → outlinks back to the frontier.

The fetcher archives each page it fetched (src/owler/warc/crawl/archiver.py, on a thread of the
fetcher's process) and passes it on to the parser once its records are stored, so a FETCHED status
never outlives a lost capture; a replay meets the fetcher task of its queue, the one that knows what
it stored before a crash. Page statuses go to the status updater with the page's outlinks, one batch
tuple per page, which the parser has passed through the URL filters and the blacklist itself (as
StormCrawler's parser does); a redirect's target goes through the URL filter and blacklist bolts.
A page goes to the parser task of its queue (``parser.grouping``: key, the default): one task sees
all of a host's pages and marks its near-duplicates (src/owler/parse/simhash.py).

Run: ``owler run explorative`` (local mode), ``sparse run -n explorative`` or
``sparse submit -n explorative``. Crawler keys: ``resources/crawler-conf.yaml``, a file named by
``OWLER_CONF``, and ``-o key=value``.
"""

from functools import partial

from streamparse import Grouping, Topology

from bolts.blacklist import BlacklistBolt
from bolts.fetcher import FetcherBolt
from bolts.parser import ParserBolt
from bolts.partitioner import PartitionerBolt
from bolts.status_updater import StatusUpdaterBolt
from bolts.urlfilter import URLFilterBolt
from owler.conf import parallelism, parser_grouping, topology_conf
from owler.constants import OUTLINKS_STREAM, STATUS_STREAM, TICK_FREQ_KEY
from spouts.frontier import FrontierSpout

TICK = {TICK_FREQ_KEY: 1}


#: the crawler conf the topology is built with; par(name): the tasks of a component
#: (parallelism.<name>, 1)
CONFIG = topology_conf()
par = partial(parallelism, CONFIG)
#: pages to the parser (parser.grouping): grouped on their queue's key, so that one parser task
#: sees all of a host's pages and their near-duplicates (owler/parse/simhash.py), or in the worker
PAGES = Grouping.fields("key") if parser_grouping(CONFIG) == "key" else Grouping.LOCAL_OR_SHUFFLE


class Explorative(Topology):
    config = CONFIG

    spout = FrontierSpout.spec(name="spout", par=par("spout"))
    partitioner = PartitionerBolt.spec(name="partitioner", inputs=[spout], par=par("partitioner"))
    fetcher = FetcherBolt.spec(name="fetcher", inputs={partitioner: Grouping.fields("key")},
                               par=par("fetcher"), config=TICK)
    parser = ParserBolt.spec(name="parser", par=par("parser"),
                             inputs={fetcher: PAGES})
    # redirect targets (the parser filters its outlinks itself: owler/parse/gate.py)
    urlfilter = URLFilterBolt.spec(name="urlfilter", par=par("urlfilter"),
                                   inputs={fetcher[OUTLINKS_STREAM]: Grouping.SHUFFLE})
    blacklist = BlacklistBolt.spec(name="blacklist", par=par("blacklist"),
                                   inputs={urlfilter[OUTLINKS_STREAM]: Grouping.SHUFFLE})
    status = StatusUpdaterBolt.spec(
        name="status", par=par("status"), config=TICK,
        inputs={fetcher[STATUS_STREAM]: Grouping.fields("url"),
                parser[STATUS_STREAM]: Grouping.fields("url"),
                parser[OUTLINKS_STREAM]: Grouping.SHUFFLE,
                blacklist[OUTLINKS_STREAM]: Grouping.SHUFFLE})

    @staticmethod
    def check_conf(conf: dict) -> None:
        """Raise ConfError for bad fetch keys before Storm starts (``owler run`` calls it)."""
        from owler.fetch.engine import check_conf as check_fetch_conf
        from owler.warc.crawl.archiver import archiving
        from owler.warc.storage.s3_stream import check_conf as check_warc_conf

        check_fetch_conf(conf)
        if archiving(conf):
            check_warc_conf(conf)
