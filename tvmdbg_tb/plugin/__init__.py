"""The TensorBoard plugin: the "TVM Debugger" tab's data routes and static files."""
