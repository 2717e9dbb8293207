"""The worker runtime: fetching, executing, heartbeats, settling, shutdown."""
