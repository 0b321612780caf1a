"""Layer 4, gRPC plumbing that knows no engine: the in-process channel and server,
the bearer-token check and the request checks (server interceptors)."""
