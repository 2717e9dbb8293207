"""The dashboard's pages beyond the queues overview, one module per group of pages."""
