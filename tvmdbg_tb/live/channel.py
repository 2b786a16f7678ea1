"""Names both ends of the control channel agree on (no heavy imports: the plugin loads this)."""

LIVE_FILE = "tvmdbg.live.json"  # in the run directory: {"host", "port", "token", "pid"}
TOKEN_HEADER = "X-Tvmdbg-Token"
