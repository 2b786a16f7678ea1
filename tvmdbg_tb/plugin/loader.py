"""Entry point of the `tensorboard_plugins` group. Imports nothing heavy: an ImportError
here would take all of TensorBoard down."""

from __future__ import annotations

from tensorboard.plugins import base_plugin

PLUGIN_NAME = "tvmdbg"


class TvmDebuggerLoader(base_plugin.TBLoader):
    def load(self, context):
        try:
            from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin
        except ImportError:
            return None  # the backend is not built yet
        return TvmDebuggerPlugin(context)
