"""The `pgwork worker` runtime: handlers, heartbeats, drain on SIGTERM, metrics and traces."""
