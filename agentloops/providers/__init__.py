"""Model clients for real providers. Each imports its SDK or HTTP library only when built."""
