"""Model providers: one `ModelClient` per API. Each imports its SDK only when built."""
