"""Reading data in chunks: sources (every accepted input as a stream of Arrow batches) and the
chunked training reader (feature-major buffers, prefetch thread, exact positions)."""
from .sources import RELEASE_METADATA_KEY, BatchOrigin, Source, open_source

__all__ = ["open_source", "Source", "BatchOrigin", "RELEASE_METADATA_KEY"]
