"""The `faultlab` command's groups beside `faultlab.cli` (the root group and the run): one module
each, thin as the root (they parse, call the library and map errors to exit codes)."""
