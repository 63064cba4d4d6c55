"""Scrapy baseline for bench/throughput.py: a CrawlSpider that follows every link on 127.0.0.1.

Run (bench/throughput.py does this):
    bench/.venv/bin/scrapy runspider bench/scrapy_bench.py \
        -a start_url=http://127.0.0.1:PORT/index.html -a stats_out=bench/out/scrapy/stats.json \
        -s JOBDIR=bench/out/scrapy/job

Pages = distinct URLs of the HTTP 200 responses parsed by the spider (Scrapy fetches the start
URL a second time when a page links to it, since start requests bypass the duplicate filter); the
final Scrapy stats are written as JSON to `stats_out` together with that count.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator
from urllib.parse import urlsplit

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class BenchSpider(CrawlSpider):
    """allowed_domains / allow_domains = 127.0.0.1 (with and without the site's port)."""

    name = "bench"
    allowed_domains = ["127.0.0.1"]
    custom_settings: Dict[str, Any] = {
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "WARNING",
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,  # Scrapy >= 2.19 otherwise opens an HTTP control port
    }

    def __init__(self, start_url: str = "", stats_out: str = "", *args: Any, **kwargs: Any) -> None:
        if not start_url:
            raise ValueError("pass -a start_url=http://127.0.0.1:PORT/index.html")
        # LinkExtractor's allow_domains compares the URL's netloc, port included, so name both.
        netloc = urlsplit(start_url).netloc
        domains = sorted({"127.0.0.1", netloc})
        self.rules = (Rule(LinkExtractor(allow_domains=domains), callback="parse_item", follow=True),)
        super().__init__(*args, **kwargs)  # compiles self.rules
        self.start_urls = [start_url]
        self.stats_out = stats_out
        self.responses = 0
        self.urls: set = set()

    def parse_start_url(self, response: Any, **kwargs: Any) -> Iterator[Any]:
        return self.parse_item(response)

    def parse_item(self, response: Any) -> Iterator[Any]:
        if response.status == 200:
            self.responses += 1
            self.urls.add(response.url)
        return iter(())

    def closed(self, reason: str) -> None:
        if not self.stats_out:
            return
        stats = {k: (v.isoformat() if hasattr(v, "isoformat") else v)
                 for k, v in self.crawler.stats.get_stats().items()}
        with open(self.stats_out, "w") as f:
            json.dump({"pages": len(self.urls), "responses": self.responses, "reason": reason,
                       "stats": stats}, f, indent=1, default=str)
