"""Generated protobuf code for the event schema (protos/tvmdbg/*.proto); do not edit by hand."""
