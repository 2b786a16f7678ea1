"""The dump on disk: record framing, file layout, the writer and the reader."""
