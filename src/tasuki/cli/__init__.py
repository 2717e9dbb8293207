"""The `tasuki` command line: one module per command group."""
