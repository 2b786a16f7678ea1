"""The dashboard of the "TVM Debugger" tab (TypeScript sources here, bundle in dist/).

The plugin serves only files inside DIST_DIR; scripts/setup.sh builds the bundle.
"""

from pathlib import Path

DIST_DIR = Path(__file__).resolve().parent / "dist"
ENTRY_MODULE = "index.js"
