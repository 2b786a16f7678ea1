"""Where a dump's files live: a local directory, or an object store (s3://, gs://, any fsspec URL).

The lowest layer of the data flow under the record framing: the writer, the reader, the CLI
and the plugin reach files only through a Store (open_store), so a logdir may be a path or a
URL alike. Object stores cannot append, so a run on one is kept as immutable sealed segments
per stream (storage/segments.py), uploaded from a local staging directory by a background
thread (storage/uploader.py); a local logdir keeps one append-only file per stream. The
reader follows either layout through the same two calls (storage/follow.py).
"""

from __future__ import annotations

from tvmdbg_tb.storage.base import Entry, Store, StoreUnavailableError
from tvmdbg_tb.storage.files import UnreadableStreamError, open_regular
from tvmdbg_tb.storage.follow import (
    FileFollower,
    Follower,
    Listing,
    SegmentFollower,
    follower,
    is_segmented,
)
from tvmdbg_tb.storage.locations import check_location, is_url, join, location_problem, open_store
from tvmdbg_tb.storage.uploader import Uploader

__all__ = [
    "Entry",
    "FileFollower",
    "Follower",
    "Listing",
    "SegmentFollower",
    "Store",
    "StoreUnavailableError",
    "check_location",
    "follower",
    "is_segmented",
    "UnreadableStreamError",
    "Uploader",
    "is_url",
    "join",
    "location_problem",
    "open_regular",
    "open_store",
]
