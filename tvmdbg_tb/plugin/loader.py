"""Entry point of the `tensorboard_plugins` group. Imports nothing heavy: an ImportError
here would take all of TensorBoard down."""

from __future__ import annotations

import logging

from tensorboard.plugins import base_plugin

PLUGIN_NAME = "tvmdbg"


class TvmDebuggerLoader(base_plugin.TBLoader):
    def load(self, context):
        try:
            from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin
        except ImportError as error:  # e.g. numpy or protobuf missing: say so, keep TensorBoard up
            logging.getLogger("tvmdbg.plugin").error("tvmdbg: the TVM Debugger plugin cannot load: %s", error)
            return None
        return TvmDebuggerPlugin(context)
