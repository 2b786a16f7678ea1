"""Entry point of the `tensorboard_plugins` group. Imports nothing heavy (only TensorBoard and
the standard library): an exception here would take all of TensorBoard down. If the backend
cannot be imported (a broken install), the tab still appears and says what is wrong."""

from __future__ import annotations

import json
import logging
import os

from tensorboard.plugins import base_plugin

from tvmdbg_tb.plugin import PLUGIN_NAME

logger = logging.getLogger("tvmdbg.plugin")


class TvmDebuggerLoader(base_plugin.TBLoader):
    def define_flags(self, parser):
        parser.add_argument(
            "--tvmdbg_allowed_hosts",
            metavar="NAMES",
            default="",
            help="TVM Debugger: comma-separated host names the plugin answers besides loopback, --host and, "
            "with --bind_all, this machine's names (e.g. the name of a reverse proxy in front of TensorBoard). "
            "See docs/security.md.",
        )

    def load(self, context):
        try:
            from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

            return TvmDebuggerPlugin(context)
        except Exception as error:  # ImportError, a protobuf version clash, ...
            reason = f"{type(error).__name__}: {error}"
            logger.error("tvmdbg: the TVM Debugger plugin cannot start: %s", reason)
            return UnavailablePlugin(context, reason)


class UnavailablePlugin(base_plugin.TBPlugin):
    """Stands in for the plugin when its backend cannot load: the tab shows the reason and
    every data route answers 503 with it."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context, reason: str):
        self._logdir = getattr(context, "logdir", "") or ""
        self.reason = reason

    def is_active(self) -> bool:
        """Active when the logdir holds a tvmdbg run (found with the standard library only)."""
        if not self._logdir:
            return False
        return any("tvmdbg.metadata" in files for _root, _dirs, files in os.walk(self._logdir))

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="TVM Debugger")

    def get_plugin_apps(self):
        return {"/index.js": self._index_js, "/*": self._error}

    def _respond(self, environ, start_response, body: str, content_type: str, code: int):
        from tensorboard.backend import http_util
        from werkzeug import wrappers

        return http_util.Respond(wrappers.Request(environ), body, content_type, code=code)(environ, start_response)

    def _index_js(self, environ, start_response):
        message = f"The TVM Debugger plugin cannot start: {self.reason}. Reinstall tvmdbg (pip install tvmdbg)."
        body = (
            "export function render() {\n"
            '  const box = document.createElement("pre");\n'
            f"  box.textContent = {json.dumps(message)};\n"
            "  document.body.appendChild(box);\n"
            "}\n"
        )
        return self._respond(environ, start_response, body, "application/javascript", 200)

    def _error(self, environ, start_response):
        body = json.dumps({"error": f"the TVM Debugger plugin cannot start: {self.reason}"})
        return self._respond(environ, start_response, body, "application/json", 503)
