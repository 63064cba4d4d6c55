"""The frontier: every URL the crawl knows and the state it is in, and the stores that keep it.

- ``contract``: the verbs a store offers (``Store``, ``Claim``, ``Counts``, ``StoreError``);
  policy and worker code depend on this module only;
- ``files``: ``FileStore``, the frontier in plain text files and its claim protocol;
- ``recovery``: what a start does to files a kill, a power cut or a hand edit left;
- ``memory``: ``MemoryStore``, the in-memory twin for fast tests of the worker loop;
- ``redisstore``: ``RedisStore``, the frontier in Redis for a crawl shared by machines;
- ``seen`` (the dedup table), ``view`` (the saved index a clean stop leaves).
"""
