"""The TensorBoard plugin: the "TVM Debugger" tab's data routes and static files."""

PLUGIN_NAME = "tvmdbg"  # the plugin's name in TensorBoard's URLs (/data/plugin/tvmdbg/...)
