"""The hash functions spider uses, from CPython's own modules: ``hashlib`` loads OpenSSL
(``_hashlib``, ~2 ms of every start) for sha1 and sha256, whose digests are the same; its
blake2b is this one already. Only WARC digests of whole bodies take OpenSSL's (faster) sha1."""

try:
    from _blake2 import blake2b
    from _sha1 import sha1
    from _sha256 import sha256
except ImportError:  # pragma: no cover - a Python built without them
    from hashlib import blake2b, sha1, sha256

__all__ = ["blake2b", "sha1", "sha256"]
